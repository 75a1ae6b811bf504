"""Broker data on a size-limited tmpfs: each node's Kafka log directory on its own mount.

Why: ``disk-full`` needs a log directory that really runs out of space
(ENOSPC from the kernel, not a simulated error), without ever filling the
host's disk, which other clusters and processes share.  A tmpfs with
``size=`` is the smallest honest way here: one ``mount`` call as root, no
loop device or image file, and a write past its size fails at once with
ENOSPC (tmpfs allocates on write, so there is no delayed-allocation window
as on ext4).  It holds data in RAM (counted against the node only as it is
filled), and fsync on it is a no-op: it is a disk for space faults, not
for power loss (that is lazyfs).

Local backend only, like lazyfs: the host mounts ``<root>/data/kafka``
before the node's sshd starts (the host's mounts are private).  Every
mount is recorded in cluster.json before it is made (``records``);
``cluster down`` unmounts whatever is below the cluster's directory
(``lazyfs.unmount_below``), record or not, even after a SIGKILL.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from kafka_chaos.harness.errors import HarnessError

FSTYPE = "tmpfs"
SIZE_MB = 512
# A dot file in the log directory's root: Kafka's LogManager loads only
# directories there, so the ballast is never taken for a partition.
BALLAST = ".kc-disk-full-ballast"


def size_mb() -> int:
    """The mount's size (``KC_TMPFS_MB``, default 512)."""
    text = os.environ.get("KC_TMPFS_MB", "")
    if not text:
        return SIZE_MB
    if not text.isdigit() or int(text) < 64:
        raise HarnessError(f"KC_TMPFS_MB={text!r}: give a whole number of MB, at least 64")
    return int(text)


def record(root_dir: str, mb: int) -> dict[str, Any]:
    """Where one node's mount and ballast go, and the mount's size."""
    mount = f"{root_dir.rstrip('/')}/data/kafka"
    return {"mount": mount, "ballast": f"{mount}/{BALLAST}", "size_mb": mb}


def records(backend_state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tmpfs mounts a cluster.json records, by node name ({} on another disk)."""
    return dict(backend_state.get("tmpfs") or {})


def mount(rec: dict[str, Any]) -> None:
    """Mount a tmpfs of ``rec['size_mb']`` on ``rec['mount']`` (idempotent)."""
    Path(rec["mount"]).mkdir(parents=True, exist_ok=True)
    if is_mounted(rec["mount"]):
        return
    args = ["mount", "-t", "tmpfs", "-o", f"size={int(rec['size_mb'])}m,mode=0755",
            "kc-tmpfs", rec["mount"]]  # fmt: skip
    res = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise HarnessError(f"mounting a tmpfs on {rec['mount']}: {res.stderr.strip()}")


def is_mounted(path: str) -> bool:
    """Whether a tmpfs is mounted at ``path``."""
    want = path.rstrip("/")
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        point = left.split()[4].encode().decode("unicode_escape")
        if point == want and right.split()[:1] == [FSTYPE]:
            return True
    return False


def fill_script(rec: dict[str, Any]) -> str:
    """Shell that fills the mount to its last byte with the ballast file.

    fallocate takes what is free in one call; dd then appends until the
    kernel says ENOSPC, because the broker may have written between the two.
    Prints the ballast's size and the bytes free afterwards; exit 3 when
    space is left (the fault would not be what it says).
    """
    mnt, ballast = shlex.quote(rec["mount"]), shlex.quote(rec["ballast"])
    return (
        f"free=$(( $(stat -f -c '%a*%S' {mnt}) )); "
        f"fallocate -l $(( free > 1048576 ? free - 1048576 : 4096 )) {ballast} 2>/dev/null; "
        f"dd if=/dev/zero of={ballast} bs=4096 oflag=append conv=notrunc status=none "
        "2>/dev/null; "
        f"left=$(( $(stat -f -c '%a*%S' {mnt}) )); "
        f'echo "$(stat -c %s {ballast}) $left"; [ "$left" -eq 0 ] || exit 3'
    )


def remove_script(rec: dict[str, Any]) -> str:
    """Shell that removes the ballast; prints 1 if there was one, else 0."""
    ballast = shlex.quote(rec["ballast"])
    return f"if [ -e {ballast} ]; then rm -f {ballast} && echo 1; else echo 0; fi"
