"""Mount the project's lazyfs under /tmp, run ckpt_write's matrix, print the table, unmount.

Why: to tell "Kafka's checkpoint write is not crash-safe" from "lazyfs's
clear-cache makes a state no real disk could" without Kafka or a cluster.
It uses only kafka-chaos's lazyfs helpers (harness/lazyfs.py: mount,
unmount; harness/lazyfs_build.py: the pinned binary).  The mount is
always taken down, also on failure or Ctrl-C.

    python3 run_repro.py [--trials N] [--variant NAME ...] [--root /tmp/ckptrepro]

Each cell: how many of N trials read back each content of the target file
(and of the temp file) through the mount, after the cut.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[2])]  # ckpt_write; the checkout's harness/

import ckpt_write  # noqa: E402  (beside this file)
from kafka_chaos.harness import lazyfs, lazyfs_build  # noqa: E402
from kafka_chaos.harness.errors import HarnessError  # noqa: E402


def run_matrix(
    root: Path, variants: list[ckpt_write.Variant], trials: int
) -> dict[tuple[str, str], Counter[tuple[str, str]]]:
    """Mount lazyfs below ``root``, run every (variant, cut) ``trials`` times, unmount."""
    rec = lazyfs.record(str(root))
    lazyfs.mount(rec, lazyfs_build.binary())
    try:
        mnt = Path(rec["mount"])
        out: dict[tuple[str, str], Counter[tuple[str, str]]] = {}
        for v in variants:
            for cut in ckpt_write.CUTS:
                seen: Counter[tuple[str, str]] = Counter()
                for i in range(trials):
                    got = ckpt_write.trial(
                        mnt / f"{v.name}.{cut}.{i}", v, cut, rec["fifo"], rec["log"]
                    )
                    seen[(got["file"], got["tmp"])] += 1
                out[(v.name, cut)] = seen
        return out
    finally:
        lazyfs.unmount_below(str(root))


def table(results: dict[tuple[str, str], Counter[tuple[str, str]]], trials: int) -> str:
    """Markdown: variant | cut | file read back | temp file | trials."""
    rows = ["| variant | cut | `leader-epoch-checkpoint` read back | `.tmp` | of N |",
            "|---|---|---|---|---|"]  # fmt: skip
    for (variant, cut), seen in results.items():
        for (file, tmp), n in sorted(seen.items(), key=lambda kv: -kv[1]):
            rows.append(f"| {variant} | {cut} | `{file}` | `{tmp}` | {n}/{trials} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--variant", action="append", choices=[v.name for v in ckpt_write.VARIANTS])
    ap.add_argument("--root", help="directory for mount and backing (default: a new /tmp dir)")
    a = ap.parse_args(argv)
    variants = [v for v in ckpt_write.VARIANTS if not a.variant or v.name in a.variant]
    # lazyfs's main.cpp drops --config-path when the path contains "-o" (any case)
    # and then aborts on config/default.toml: hence no hyphen in the prefix
    root = Path(a.root) if a.root else Path(tempfile.mkdtemp(prefix="ckptrepro_"))
    if "-o" in str(root).lower():
        print(f"run_repro: {root}: lazyfs takes no config path with '-o' in it", file=sys.stderr)
        return 2
    try:
        results = run_matrix(root, variants, a.trials)
    except (HarnessError, OSError, RuntimeError) as e:
        print(f"run_repro: {e}", file=sys.stderr)
        return 2
    finally:
        if not lazyfs.mounted_below(str(root)):
            shutil.rmtree(root, ignore_errors=True)
    print(table(results, a.trials))
    return 0


if __name__ == "__main__":
    sys.exit(main())
