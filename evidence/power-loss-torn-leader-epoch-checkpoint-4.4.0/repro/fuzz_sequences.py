"""Random Kafka-like file sequences on lazyfs, checked after every clear-cache.

Why: ckpt_write.py cuts one checkpoint write; the bench's broker did much
more around it.  This drives several partition directories at once with:
Kafka's checkpoint writes, process crashes at a step of one (no clear-cache),
clear-caches, reads, a ``Files.createFile``-style touch, renames of a
directory to ``...-delete``, removal of those, new directories under reused
names, and segment / index files (preallocate, mmap writes, trims,
appends, fsyncs, unlinks and re-creation at the same path, so that inode
numbers get reused).  After each clear-cache it checks that:

- every checkpoint reads back a content it may have (the last whole write,
  or the one a crash cut after its rename);
- every file reads the same through the mount as in lazyfs's backing dir
  (the cache is empty then, so a difference is lazyfs's own state).

    python3 fuzz_sequences.py --seeds 1-10 --steps 600

Prints one line per seed; the first failure with the last 30 operations.
"""

from __future__ import annotations

import argparse
import mmap
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[2])]  # ckpt_write; the checkout's harness/

import ckpt_write as cw  # noqa: E402
from kafka_chaos.harness import lazyfs, lazyfs_build  # noqa: E402
from kafka_chaos.harness.errors import HarnessError  # noqa: E402

CONTENTS = (b"0\n0\n", b"0\n1\n0 0\n", b"0\n1\n3 0\n", b"0\n2\n0 0\n1 5\n")
SEGMENT_FILES = (
    "00000000000000000000.index",
    "00000000000000000000.timeindex",
    "00000000000000000000.log",
)
OPS = ("new", "write", "write", "crash", "clear", "read", "touch", "delete", "purge") + (
    "segment",
) * 4


class Fuzz:
    """One seed's run on one mount: partition dirs, what each checkpoint may read."""

    def __init__(self, rec: dict[str, str], seed: int) -> None:
        self.rec, self.rng = rec, random.Random(seed)
        self.mnt, self.back = Path(rec["mount"]), Path(rec["backing"])
        self.parts: dict[str, tuple[Path, set[bytes]]] = {}
        self.hist: list[str] = []
        self.made = 0

    def run(self, steps: int) -> str:
        """'' if every check held, else what failed and the last 30 operations."""
        for step in range(steps):
            op = self.rng.choice(OPS)
            if op == "new" or not self.parts:
                self._new()
                continue
            name = self.rng.choice(list(self.parts))
            failed = getattr(self, f"_{op}")(name, step)
            if failed:
                return f"{failed}\n  last ops: {self.hist[-30:]}"
        return ""

    def _new(self) -> None:
        self.made += 1
        name = f"tp-{self.made % 3}"
        if name in self.parts:
            return
        d = self.mnt / name
        d.mkdir(exist_ok=True)
        target = d / cw.NAME
        target.touch()
        self.parts[name] = (d, {b"", target.read_bytes()})
        self.hist.append(f"new {name}")

    def _write(self, name: str, _step: int) -> str:
        d, _ = self.parts[name]
        c = self.rng.choice(CONTENTS)
        cw.write_checkpoint(d / cw.NAME, c, cw.KAFKA)
        self.parts[name] = (d, {c})
        self.hist.append(f"write {name} {c!r}")
        return ""

    def _crash(self, name: str, _step: int) -> str:
        """The process dies at a step of a write; lazyfs keeps its cache."""
        d, ok = self.parts[name]
        c, cut = self.rng.choice(CONTENTS), self.rng.choice(cw.CUTS)
        tmp = d / (cw.NAME + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, c)
        if cut != "before-fsync":
            os.fsync(fd)
        os.close(fd)
        if cut in ("after-rename", "after-dir-fsync"):
            os.rename(tmp, d / cw.NAME)
            self.parts[name] = (d, {c})
        self.hist.append(f"crash {name} {c!r} {cut}")
        return ""

    def _clear(self, _name: str, _step: int) -> str:
        cw.clear_cache(self.rec["fifo"], self.rec["log"])
        self.hist.append("clear")
        for name, (d, ok) in list(self.parts.items()):
            got = (d / cw.NAME).read_bytes()
            if got not in ok:
                return f"checkpoint {name} read {got!r}, may be {sorted(ok)}"
            self.parts[name] = (d, {got})
        for p in sorted(self.mnt.rglob("*")):
            if p.is_file():
                seen, held = p.read_bytes(), (self.back / p.relative_to(self.mnt)).read_bytes()
                if seen != held:
                    rel = p.relative_to(self.mnt)
                    return f"{rel}: mount reads {len(seen)} bytes, backing holds {len(held)}"
        return ""

    def _read(self, name: str, _step: int) -> str:
        (self.parts[name][0] / cw.NAME).read_bytes()
        self.hist.append(f"read {name}")
        return ""

    def _touch(self, name: str, _step: int) -> str:
        """CheckpointFile's constructor: Files.createFile, EEXIST ignored."""
        try:
            (self.parts[name][0] / cw.NAME).touch(exist_ok=False)
        except FileExistsError:
            pass
        self.hist.append(f"touch {name}")
        return ""

    def _delete(self, name: str, step: int) -> str:
        d, ok = self.parts.pop(name)
        new = f"{name}.{step}-delete"
        d.rename(d.with_name(new))
        self.parts[new] = (d.with_name(new), ok)
        self.hist.append(f"rename {name} -> {new}")
        return ""

    def _purge(self, _name: str, _step: int) -> str:
        dels = [k for k in self.parts if k.endswith("-delete")]
        if dels:
            k = self.rng.choice(dels)
            shutil.rmtree(self.parts.pop(k)[0])
            self.hist.append(f"rm -r {k}")
        return ""

    def _segment(self, name: str, _step: int) -> str:
        f = self.parts[name][0] / self.rng.choice(SEGMENT_FILES)
        what = self.rng.choice(("create", "mmap-write", "trim", "unlink", "append", "fsync"))
        if what != "create" and not f.exists():
            return ""
        if what == "create":
            fd = os.open(f, os.O_RDWR | os.O_CREAT, 0o644)
            os.ftruncate(fd, self.rng.choice((4096, 65536)))  # preallocated, as Kafka's indexes
            os.close(fd)
        elif what == "mmap-write" and f.stat().st_size >= 16:
            fd = os.open(f, os.O_RDWR)
            with mmap.mmap(fd, os.fstat(fd).st_size) as m:
                at = self.rng.randrange(0, len(m) - 8)
                m[at : at + 8] = os.urandom(8)
                if self.rng.random() < 0.5:
                    m.flush()
            os.close(fd)
        elif what == "trim":
            fd = os.open(f, os.O_RDWR)
            os.ftruncate(fd, self.rng.choice((0, 8, 12, 24)))
            os.close(fd)
        elif what == "unlink":
            f.unlink()
        elif what == "append":
            with open(f, "ab") as out:
                out.write(os.urandom(self.rng.randrange(1, 300)))
        elif what == "fsync":
            fd = os.open(f, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        self.hist.append(f"{what} {f.parent.name}/{f.name}")
        return ""


def seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1-10", help="a seed or a range, e.g. 1-10")
    ap.add_argument("--steps", type=int, default=600)
    a = ap.parse_args(argv)
    try:
        todo = seeds(a.seeds)
    except ValueError:
        print(f"fuzz_sequences: --seeds {a.seeds!r}: give N or N-M", file=sys.stderr)
        return 2
    failures = 0
    for seed in todo:
        root = Path(tempfile.mkdtemp(prefix="ckptfuzz_"))
        rec = lazyfs.record(str(root))
        try:
            lazyfs.mount(rec, lazyfs_build.binary())
            failed = Fuzz(rec, seed).run(a.steps)
        except (HarnessError, OSError, RuntimeError) as e:
            print(f"fuzz_sequences: seed {seed}: {e}", file=sys.stderr)
            return 2
        finally:
            lazyfs.unmount_below(str(root))
            if not lazyfs.mounted_below(str(root)):
                shutil.rmtree(root, ignore_errors=True)
        failures += bool(failed)
        print(f"seed {seed}: {a.steps} steps: {failed or 'every check held'}")
    print(f"{failures} of {len(todo)} seeds failed a check")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
