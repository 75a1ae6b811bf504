"""Memory of one `kafka-chaos check`: the Python process (which holds Elle's JVM,
started in-process by JPype) and Spark's JVM (a child, driven over Py4J),
sampled every 0.2 s from /proc, with each one's peak and the peak of their sum.

    python bench/check_memory.py HISTORY [--config CONFIG_JSON]

Prints figures; asserts nothing.  The budget it is read against: 24 GiB on
the development machine, with a running 3-broker cluster (3 x 512 MiB heaps,
about 2.5 GiB resident) beside it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

PAGE_KIB = 4


def rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * PAGE_KIB
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (one level of /proc/<pid>/task/*/children at a time)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except (FileNotFoundError, ValueError):
                continue
            out += kids
            todo += kids
    return out


def name(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return "?"
    return "spark-jvm" if cmd and cmd[0].endswith(b"java") else Path(cmd[0].decode()).name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("history", type=Path)
    ap.add_argument("--config", type=Path)
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "kafka_chaos.cli", "check", str(args.history), "--json"]
    if args.config:
        cmd += ["--config", str(args.config)]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peaks: dict[str, int] = {}
    total_peak = 0
    while proc.poll() is None:
        tree = {"python (+ Elle's JVM)": rss_kib(proc.pid)}
        for kid in children(proc.pid):
            label = name(kid)
            tree[label] = tree.get(label, 0) + rss_kib(kid)
        for label, kib in tree.items():
            peaks[label] = max(peaks.get(label, 0), kib)
        total_peak = max(total_peak, sum(tree.values()))
        time.sleep(0.2)
    took = time.monotonic() - started
    print(f"{args.history.name}: exit {proc.returncode} after {took:.1f} s")
    for label, kib in sorted(peaks.items(), key=lambda kv: -kv[1]):
        print(f"  peak RSS {label:>24}: {kib / 1024:8.0f} MiB")
    print(f"  peak RSS {'all together':>24}: {total_peak / 1024:8.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
