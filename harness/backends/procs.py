"""Ending a node's processes on the harness host, by pid only.

All local nodes share one PID namespace with other engineers' clusters, so a
process is only ever signalled when we can prove it is ours: its pid came
from one of our pid files and its command line contains the node's root_dir,
or it lives in a network namespace this cluster created.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

TERM_GRACE_S = 10.0


def cmdline(pid: int) -> str | None:
    """The command line of ``pid`` with NULs as spaces, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return fields[0] != "Z"


def read_pid(pid_file: Path) -> int | None:
    try:
        text = pid_file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def owned_pids_from_files(run_dir: Path, marker: str) -> dict[int, Path]:
    """Live pids from ``run_dir/*.pid`` whose command line contains ``marker``."""
    owned: dict[int, Path] = {}
    if not run_dir.is_dir():
        return owned
    for pid_file in sorted(run_dir.glob("*.pid")):
        pid = read_pid(pid_file)
        if pid is None or pid <= 1:
            continue
        line = cmdline(pid)
        if line is None or marker not in line:
            if line is not None:
                log.warning("%s: pid %d is not ours (%s); leaving it", pid_file, pid, line[:80])
            continue
        owned[pid] = pid_file
    return owned


def terminate(pids: Iterable[int], grace_s: float = TERM_GRACE_S) -> list[int]:
    """SIGCONT then SIGTERM ``pids``; SIGKILL those still alive after ``grace_s``.

    SIGCONT comes first because a paused (SIGSTOPped) process would otherwise
    sit on its SIGTERM forever.  Returns the pids that had to be SIGKILLed.
    """
    pending = [p for p in pids if alive(p)]
    for sig in (signal.SIGCONT, signal.SIGTERM):
        for pid in pending:
            _signal(pid, sig)
    deadline = time.monotonic() + grace_s
    while pending and time.monotonic() < deadline:
        time.sleep(0.1)
        pending = [p for p in pending if alive(p)]
    for pid in pending:
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while any(alive(p) for p in pending) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pending


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
