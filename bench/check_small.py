"""The default run's check, cold, side by side with another revision (issue 46).

    python bench/check_small.py [--rev HEAD~3] [--history HISTORY [--config CONFIG]]
                                [--ops 120000] [--rounds 3] [--target 20]

A default run (60 s at 1000 sends/s) records about 120k operations, and
``kafka-chaos check`` judges them in a fresh process: JVM start, Parquet
from history.jsonl, planning and running every check.  This times exactly
that for the work tree and for ``--rev`` (exported with ``git archive``, as
bench/check_diff.py does, so the repository's index and work tree are left
alone), on private copies of the same history, the two alternating round by
round so both see the same load.  Prints each round's seconds, each pair's
ratio (work tree / rev), the medians, whether the work tree meets the
target, and whether the two outputs are identical (bench/check_diff.py's
rule).  The history: a recorded default-size run kept in evidence/ unless
``--history`` (or ``--ops``: a bench/gen_history.py one) is given.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from check_diff import WORKTREE, History, check, differences, export, normalized  # noqa: E402

RECORDED = HERE.parent / "evidence" / "vagrant-tcg-kill-partition-4.4.0"  # 121,471 lines


def history_dir(args: argparse.Namespace, into: Path) -> Path:
    """A directory holding only history.jsonl (and config.json) to judge."""
    into.mkdir(parents=True)
    dest = into / "history.jsonl"
    if args.history:
        source, config = args.history, args.config
    elif args.ops:
        from testkit.synthetic import generate

        generate(int(args.ops), dest)
        return into
    else:
        source, config = RECORDED / "history.jsonl.gz", RECORDED / "config.json"
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rb") as src, open(dest, "wb") as dst:
        shutil.copyfileobj(src, dst)
    if config:
        shutil.copy(config, into / "config.json")
    return into


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="HEAD", help="the revision to compare with (git)")
    ap.add_argument("--history", type=Path, help="history.jsonl(.gz) to judge")
    ap.add_argument("--config", type=Path, help="its run config")
    ap.add_argument("--ops", type=float, help="judge a generated history of this many ops")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--target", type=float, default=20.0, help="seconds, the work tree's")
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    if args.history and not args.history.is_file():
        raise SystemExit(f"{args.history}: no such file")
    work = Path(tempfile.mkdtemp(prefix="kc-check-small-"))
    try:
        before = export(args.rev, work / "rev")
        after = export(WORKTREE, work / "unused")
        history = History("small", history_dir(args, work / "history"))
        print(f"# {before.label} against the work tree, {args.rounds} rounds, cold "
              f"(a fresh process each)", flush=True)  # fmt: skip
        print(f"{'round':>5} {'rev s':>7} {'tree s':>7} {'tree/rev':>9}  output")
        pairs = []
        for n in range(1, args.rounds + 1):
            # Alternate who goes first, so neither side always meets the warmer page cache.
            sides = (before, after) if n % 2 else (after, before)
            got = {tree.label: check(tree, history, work / "runs", args.timeout) for tree in sides}
            a, b = got[before.label], got[after.label]
            same = not list(differences(normalized(a.output), normalized(b.output)))
            pairs.append((a.seconds, b.seconds))
            print(f"{n:>5} {a.seconds:>7.1f} {b.seconds:>7.1f} {b.seconds / a.seconds:>8.2f}x  "
                  f"{'identical' if same else 'DIFFERENT'} ({b.output.get('ops')} ops, "
                  f"verdict {b.output.get('verdict')})", flush=True)  # fmt: skip
        rev_s = statistics.median(p[0] for p in pairs)
        tree_s = statistics.median(p[1] for p in pairs)
        ratio = statistics.median(p[1] / p[0] for p in pairs)
        print(f"median: rev {rev_s:.1f} s, work tree {tree_s:.1f} s, tree/rev {ratio:.2f}x; "
              f"target <= {args.target:.0f} s cold: "
              f"{'met' if tree_s <= args.target else 'missed'}")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
