"""Every package installs under kafka_chaos. (issue 47), and nothing imports the old names.

Generic top-level names (harness, checkers, reports) collide with any other
distribution's, so the wheel holds the design's folders inside ``kafka_chaos``
(pyproject.toml's package-dir) and the code imports them by that name.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("harness", "nemeses", "workloads", "checkers", "forensics", "reports")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _packages_on_disk() -> set[str]:
    found = {"kafka_chaos." + ".".join(p.parent.relative_to(ROOT).parts)
             for folder in FOLDERS for p in (ROOT / folder).rglob("__init__.py")}  # fmt: skip
    found |= {".".join(p.parent.relative_to(ROOT).parts)
              for p in (ROOT / "kafka_chaos").rglob("__init__.py")}  # fmt: skip
    return found


def test_every_package_on_disk_is_listed_and_mapped() -> None:
    tool = _pyproject()["tool"]["setuptools"]
    assert set(tool["packages"]) == _packages_on_disk()
    assert tool["package-dir"] == {f"kafka_chaos.{f}": f for f in FOLDERS}


def test_no_file_imports_a_package_by_its_old_top_level_name() -> None:
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()  # fmt: skip
    old = []
    for name in tracked:
        tree = ast.parse((ROOT / name).read_text(), name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                heads = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                heads = [node.module.split(".")[0]]
            else:
                continue
            old += [f"{name}:{node.lineno}" for h in heads if h in FOLDERS]
    assert not old, f"imports by the old names: {old[:10]}"


def test_the_wheel_holds_every_package_inside_kafka_chaos(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(ROOT)], check=True, timeout=300)  # fmt: skip
    (wheel,) = tmp_path.glob("kafka_chaos-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"kafka_chaos"}
    for needed in ("kafka_chaos/harness/backends/local.py",
                   "kafka_chaos/checkers/txn/elle_cycles.clj",
                   "kafka_chaos/reports/templates/report.j2",
                   "kafka_chaos/workloads/java/log4j2.properties"):  # fmt: skip
        assert needed in names, needed


def test_outside_the_checkout_only_the_namespace_imports(tmp_path: Path) -> None:
    probe = ("import importlib.util as u, kafka_chaos.checkers as c; "
             "print(u.find_spec('checkers') is None, c.__name__)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "kafka_chaos.checkers"]
