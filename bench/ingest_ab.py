"""Side by side: time ingest (history.jsonl -> Parquet rows, checkers/ingest/convert.py)
of two revisions on one history, alternating round by round so that machine
noise hits them alike, and hold their rows equal.

    python bench/ingest_ab.py BEFORE AFTER HISTORY [--rounds 3]

BEFORE and AFTER are git revisions or ``WORKTREE`` (exported as
bench/check_diff.py does).  Each conversion runs in a fresh process with
only its tree on the path, and is timed there (imports excluded): wall
seconds and the process's CPU seconds.  After the first round the two sides'
rows (``read_rows``, every column of every row) must be equal.  Prints every
run, then each side's mean and the ratio AFTER/BEFORE.  Figures only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_diff import Tree, export, tree_env  # noqa: E402

_TIMED = """
import json, resource, sys, time
from {checkers}.ingest.convert import convert
t0, c0 = time.monotonic(), time.process_time()
convert(sys.argv[1], sys.argv[2])
print(json.dumps({{"wall": time.monotonic() - t0, "cpu": time.process_time() - c0}}))
"""
_SAME = """
import sys
from {checkers}.ingest.convert import read_rows
a, b = read_rows(sys.argv[1]), read_rows(sys.argv[2])
print("same" if a.equals(b) else f"DIFFERENT ({{a.num_rows}} vs {{b.num_rows}} rows)")
"""


def converted(tree: Tree, history: Path, out: Path) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    code = _TIMED.format(checkers=tree.checkers)
    argv = [sys.executable, "-c", code, str(history), str(out)]
    done = subprocess.run(argv, cwd=tree.path, env=tree_env(tree), capture_output=True,
                          text=True, check=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("history", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kc-ingest-ab-") as tmp:
        trees = [export(args.before, Path(tmp) / "before"), export(args.after, Path(tmp) / "after")]
        runs: dict[str, list[dict[str, float]]] = {t.label: [] for t in trees}
        outs = [Path(tmp) / "rows-before", Path(tmp) / "rows-after"]
        for round_ in range(1, args.rounds + 1):
            for tree, out in zip(trees, outs, strict=True):
                took = converted(tree, args.history.resolve(), out)
                runs[tree.label].append(took)
                print(f"round {round_} {took['wall']:6.2f} s  {took['cpu']:6.2f} CPU-s  "
                      f"[{tree.label}]", flush=True)  # fmt: skip
            if round_ == 1:
                code = _SAME.format(checkers=trees[1].checkers)
                same = subprocess.run([sys.executable, "-c", code, *map(str, outs)],
                                      cwd=trees[1].path, env=tree_env(trees[1]),
                                      capture_output=True, text=True, check=True)  # fmt: skip
                print(f"rows: {same.stdout.strip()}", flush=True)
        base = {k: statistics.mean(r[k] for r in runs[trees[0].label]) for k in ("wall", "cpu")}
        for label, rs in runs.items():
            mean = {k: statistics.mean(r[k] for r in rs) for k in ("wall", "cpu")}
            ratio = {k: mean[k] / base[k] for k in mean}
            print(f"mean {mean['wall']:6.2f} s  {ratio['wall']:5.2f}x  "
                  f"{mean['cpu']:6.2f} CPU-s  {ratio['cpu']:5.2f}x  [{label}]")  # fmt: skip


if __name__ == "__main__":
    main()
