"""Ending a node's processes on the harness host, by pid only.

All local nodes share one PID namespace with other engineers' clusters, so a
process is only ever signalled when we can prove it is ours: its pid came
from one of our pid files and its command line contains the node's root_dir,
or it lives in a network namespace this cluster created.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

TERM_GRACE_S = 10.0


def cmdline(pid: int) -> list[str] | None:
    """The arguments of ``pid``, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def mentions_root(args: list[str], root_dir: str) -> bool:
    """True when an argument is ``root_dir``, ends in ``=root_dir`` or names a path below it.

    Matching whole path components keeps ``/x/a1`` from claiming ``/x/a10``'s processes.
    """
    root = root_dir.rstrip("/")
    return any(a == root or a.endswith("=" + root) or root + "/" in a for a in args)


def owned(pid: int, root_dir: str) -> bool:
    """``pid`` is alive and its command line names ``root_dir``."""
    args = cmdline(pid)
    return args is not None and mentions_root(args, root_dir) and alive(pid)


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


def owned_pids_from_files(run_dir: Path, root_dir: str) -> dict[int, Path]:
    """Live pids from ``run_dir/*.pid`` whose command line names ``root_dir``."""
    found: dict[int, Path] = {}
    if not run_dir.is_dir():
        return found
    for pid_file in sorted(run_dir.glob("*.pid")):
        pid = read_pid(pid_file)
        if pid is None or pid <= 1:
            continue
        if not owned(pid, root_dir):
            if alive(pid):
                log.warning("%s: pid %d is not ours; leaving it", pid_file, pid)
            continue
        found[pid] = pid_file
    return found


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


# --- host commands the harness started (vagrant up) ----------------------------------


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), or None if it is gone.

    A pid with the recorded start time is the process we started, not a later
    one that reused the number.
    """
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def write_pid_record(path: Path, pid: int) -> None:
    """``pid start_time``: enough for ``stop_recorded`` to prove the process is ours."""
    path.write_text(f"{pid} {start_time(pid) or '?'}\n")


def stop_recorded(path: Path, grace_s: float = TERM_GRACE_S) -> int | None:
    """Stop the process group a pid record names, if that process still runs.

    The group is the one the harness started with ``start_new_session``, so
    its children (ssh, qemu-img) go too.  Returns the pid it stopped.
    """
    try:
        pid_text, recorded = path.read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    if pid <= 1 or start_time(pid) != recorded or not alive(pid):
        path.unlink(missing_ok=True)
        return None
    stop_group(pid, grace_s)
    path.unlink(missing_ok=True)
    return pid


def stop_group(pid: int, grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM the process group led by ``pid``; SIGKILL it after ``grace_s``."""
    for sig in (signal.SIGCONT, signal.SIGTERM):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
    deadline = time.monotonic() + grace_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
