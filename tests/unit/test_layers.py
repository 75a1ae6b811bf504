"""The product's packages stand in floors, and every import points down.

Why a test: the floors are the design (docs/extending.md's table): the ground
floor knows nothing of a workload or a check, workloads and faults are peers,
and so are the checks and the post-heal forensics.  An import that climbs, or
one between peers, is the first step of a cycle; it should fail here, with the
file and line, rather than be found later in a picture of the code.  Imports by
name at run time ("module:function" in a declaration, ``import_module``) are
not imports here: they are how a lower floor names a higher one on purpose.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLOORS = {
    "harness": 0,
    "workloads": 1,
    "nemeses": 1,
    "checkers": 2,
    "forensics": 2,
    "reports": 3,
    "kafka_chaos": 4,
}


def _package(module: str) -> str | None:
    """The product package a dotted module name lands in (``kafka_chaos.harness.x``
    too, once every package installs under kafka_chaos.)."""
    parts = module.split(".")
    if parts[0] == "kafka_chaos" and len(parts) > 1 and parts[1] in FLOORS:
        return parts[1]
    return parts[0] if parts[0] in FLOORS else None


def _imports() -> list[tuple[str, int, str, str]]:
    """(file, line, its package, the package it imports) for every cross-package import."""
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()  # fmt: skip
    out = []
    for name in tracked:
        own = name.split("/")[0]
        if own not in FLOORS:
            continue  # tests, testkit, bench, evidence: beside the product
        for node in ast.walk(ast.parse((ROOT / name).read_text(), name)):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                target = _package(module)
                if target is not None and target != own:
                    out.append((name, node.lineno, own, target))
    return out


def test_every_import_points_down_and_peers_stay_apart() -> None:
    imports = _imports()
    assert len(imports) > 300  # the walk saw the product
    wrong = [f"{name}:{line} ({own} -> {target})" for name, line, own, target in imports
             if FLOORS[target] >= FLOORS[own]]  # fmt: skip
    assert not wrong, "imports that climb or cross to a peer: " + ", ".join(wrong)


def test_the_floors_name_every_product_package() -> None:
    folders = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert folders - {"testkit"} == set(FLOORS)
