"""One run per cluster at a time.

Two runs on one cluster (overlapping nightly jobs, say) corrupt each other:
each heals the other's faults and restarts its brokers.  A run therefore
holds a lease on its cluster for as long as it acts on it.

The lease is an exclusive ``flock`` on ``<home>/leases/<cluster>.lock``, a
file apart from the cluster's own directory (which a run may destroy and
recreate while holding the lease).  The kernel drops the lock when its
holder dies, even by SIGKILL, so a dead holder never blocks the next run;
the file still names that holder, which is how a takeover is noticed and
logged.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kafka_chaos.harness.cluster import home
from kafka_chaos.harness.errors import HarnessError

log = logging.getLogger(__name__)


class ClusterBusy(HarnessError):
    """Another live run holds the cluster's lease."""


def lease_path(cluster: str) -> Path:
    return home() / "leases" / f"{cluster}.lock"


@contextlib.contextmanager
def cluster_lease(cluster: str, run_dir: str | Path) -> Iterator[None]:
    """Hold ``cluster``'s lease for the body; refuse at once if a live run has it."""
    path = lease_path(cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            raise ClusterBusy(
                f"cluster {cluster!r} is in use by run {holder.get('run_dir', '?')} "
                f"(pid {holder.get('pid', '?')}); wait for it to end, or stop it"
            ) from None
        previous = _read(fd)
        if previous.get("pid"):
            log.warning(
                "taking over the lease of cluster %r from run %s (pid %s), which died holding it",
                cluster,
                previous.get("run_dir", "?"),
                previous["pid"],
            )
        _write(fd, {"pid": os.getpid(), "run_dir": str(run_dir)})
        try:
            yield
        finally:
            _write(fd, {})  # released cleanly: nothing to take over
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _read(fd: int) -> dict[str, Any]:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 65536)
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _write(fd: int, data: dict[str, Any]) -> None:
    body = json.dumps(data).encode() if data else b""
    os.ftruncate(fd, 0)
    os.pwrite(fd, body, 0)
    os.fsync(fd)
