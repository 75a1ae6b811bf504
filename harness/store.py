"""The run store: one directory per run, ``store/<test>/<timestamp>/``.

Everything a run produces lands in its directory so a run can be re-checked,
re-rendered, replayed or reproduced later from the directory alone.
``store/latest`` always points at the newest run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka_chaos.harness.errors import HarnessError

DEFAULT_STORE = Path("store")

CONFIG = "config.json"
HISTORY = "history.jsonl"
CLUSTER_STATE = "cluster-state.jsonl"
SCHEDULE = "schedule.json"
RESULTS = "results.json"
REPORT = "report.html"
LOGS = "logs"
HARNESS_LOG = "harness.log"


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    def file(self, name: str) -> Path:
        return self.path / name

    def read_json(self, name: str) -> dict[str, Any]:
        path = self.file(name)
        try:
            return json.loads(path.read_text())
        except FileNotFoundError as e:
            raise HarnessError(f"{path}: missing from run directory {self.path}") from e
        except json.JSONDecodeError as e:
            raise HarnessError(f"{path}: line {e.lineno}: not valid JSON: {e.msg}") from e


def new_run_dir(store: Path, test_name: str) -> RunDir:
    """Create a fresh, uniquely named run directory."""
    if not test_name or "/" in test_name or test_name.startswith("."):
        raise HarnessError(f"invalid test name {test_name!r}: use letters, digits, '-' and '_'")
    base = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    parent = store / test_name
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1000):
        path = parent / (base if n == 0 else f"{base}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return RunDir(path)
    raise HarnessError(f"could not create a run directory under {parent}")


def point_latest(store: Path, run: RunDir) -> None:
    """Atomically repoint ``store/latest`` at ``run`` (relative symlink)."""
    link = store / "latest"
    tmp = store / f".latest-{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(run.path.resolve().relative_to(store.resolve()))
    tmp.replace(link)


def resolve_run_dir(path: Path) -> RunDir:
    """Accept a run directory (or ``store/latest``) given by the user."""
    path = Path(path)
    if not path.is_dir():
        raise HarnessError(f"{path}: not a run directory")
    if not (path / CONFIG).exists():
        raise HarnessError(f"{path}: not a run directory (no {CONFIG})")
    return RunDir(path.resolve())


def iter_runs(store: Path) -> list[RunDir]:
    """Every run in the store, oldest first."""
    runs = [RunDir(p.parent) for p in store.glob(f"*/*/{CONFIG}") if not p.parent.is_symlink()]
    return sorted(runs, key=lambda r: r.run_id)
