"""Kafka's checkpoint write, step by step, with a lazyfs power cut at a chosen step.

Standalone (standard library only): no Kafka, no kafka-chaos.  It mirrors
``CheckpointFile.write`` + ``Utils.atomicMoveWithFallback`` of Kafka 4.4.0
(server-common / clients jars, checked with javap):

1. ``new FileOutputStream(<file>.tmp)``  -> open(O_WRONLY|O_CREAT|O_TRUNC)
2. ``BufferedWriter.write`` + ``flush``  -> one write(2) of the whole text
3. ``getFD().sync()``                    -> fsync(2) of the temp file
4. close
5. ``Files.move(tmp, file, ATOMIC_MOVE)`` -> rename(2) over the old file
6. ``flushDir(parent)``                  -> open(dir, O_RDONLY) + fsync(2)

A cut is ``lazyfs::clear-cache`` written to the mount's control FIFO (then
wait for lazyfs's log to say "cache is cleared"): what a power loss does in
kafka-chaos's power-loss fault.  After a cut the sequence stops, as the
process would die with the power; open descriptors are closed without any
further call on the file.

Run by hand against any lazyfs mount::

    python3 ckpt_write.py DIR --fifo FIFO --log LAZYFS_LOG --cut after-rename
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

NAME = "leader-epoch-checkpoint"
OLD = b"0\n0\n"  # version 0, no entries (what a truncation to log end 0 writes)
NEW = b"0\n1\n0 0\n"  # version 0, one entry: epoch 0 from offset 0
CUTS = ("before-fsync", "after-fsync", "after-rename", "after-dir-fsync")
CLEARED_LINE = "cache is cleared"


@dataclass(frozen=True)
class Variant:
    """One way of writing the file: Kafka's, or Kafka's with one step changed."""

    name: str
    fsync_file: bool = True  # step 3
    fsync_dir: bool = True  # step 6
    # how the old file got there: "settled" (Kafka's write, then a clear-cache,
    # so lazyfs holds nothing of it), "back-to-back" (Kafka's write just before,
    # still in lazyfs's cache, clean), "unsynced" (plain write, never fsynced)
    old: str = "settled"


KAFKA = Variant("kafka")
VARIANTS = (
    KAFKA,
    Variant("no-file-fsync", fsync_file=False),
    Variant("no-dir-fsync", fsync_dir=False),
    Variant("back-to-back", old="back-to-back"),
    Variant("old-unsynced", old="unsynced"),
)


class Cut(Exception):
    """The power went at this step: the writer stops."""


def clear_cache(fifo: str, log: str, timeout_s: float = 10.0) -> None:
    """Drop lazyfs's unsynced writes and wait until its log confirms it."""
    before = _count_cleared(log)
    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO if lazyfs is gone
    try:
        os.write(fd, b"lazyfs::clear-cache\n")
    finally:
        os.close(fd)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _count_cleared(log) > before:
            return
        time.sleep(0.01)
    raise RuntimeError(f"lazyfs did not confirm clear-cache within {timeout_s:.0f}s ({log})")


def _count_cleared(log: str) -> int:
    try:
        return Path(log).read_text(errors="replace").count(CLEARED_LINE)
    except FileNotFoundError:
        return 0


def write_checkpoint(
    path: Path, data: bytes, v: Variant, cut: str | None = None, fifo: str = "", log: str = ""
) -> None:
    """Write ``data`` to ``path`` Kafka's way; clear lazyfs's cache at ``cut`` and raise Cut."""
    tmp = path.with_name(path.name + ".tmp")

    def point(name: str) -> None:
        if name == cut:
            clear_cache(fifo, log)
            raise Cut(name)

    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        point("before-fsync")
        if v.fsync_file:
            os.fsync(fd)
        point("after-fsync")
    finally:
        os.close(fd)
    os.rename(tmp, path)  # Files.move(ATOMIC_MOVE) is rename(2) on Linux
    point("after-rename")
    if v.fsync_dir:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    point("after-dir-fsync")


def trial(workdir: Path, v: Variant, cut: str, fifo: str, log: str) -> dict[str, str]:
    """One fresh directory: the old file, then the new write cut at ``cut``; what is read back."""
    workdir.mkdir(parents=True)
    target = workdir / NAME
    if v.old == "unsynced":
        target.write_bytes(OLD)
    else:
        write_checkpoint(target, OLD, KAFKA)
    if v.old == "settled":  # nothing of the old file left in lazyfs's cache
        clear_cache(fifo, log)
    try:
        write_checkpoint(target, NEW, v, cut, fifo, log)
    except Cut:
        pass
    else:
        raise RuntimeError(f"cut {cut!r} never reached")
    return {"file": _show(target), "tmp": _show(target.with_name(NAME + ".tmp"))}


def _show(path: Path) -> str:
    try:
        return repr(path.read_bytes())[1:]  # b'..' -> '..'
    except FileNotFoundError:
        return "(absent)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="a new directory on the lazyfs mount")
    ap.add_argument("--fifo", required=True, help="lazyfs's control FIFO")
    ap.add_argument("--log", required=True, help="lazyfs's log file (confirms clear-cache)")
    ap.add_argument("--cut", choices=CUTS, required=True)
    ap.add_argument("--variant", choices=[v.name for v in VARIANTS], default="kafka")
    a = ap.parse_args(argv)
    v = next(x for x in VARIANTS if x.name == a.variant)
    try:
        got = trial(Path(a.dir), v, a.cut, a.fifo, a.log)
    except (OSError, RuntimeError) as e:
        print(f"ckpt_write: {e}", file=sys.stderr)
        return 2
    print(f"{a.variant} cut={a.cut}: file={got['file']} tmp={got['tmp']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
