"""The 1e7-operation queue check, cold, against DuckDB on the same file (issue 46).

    python bench/check_cold.py HISTORY [--config C] [--rev REV] [--rounds 2]

What "cold" means for a run's history.  A run writes its Parquet rows while
it records (checkers/ingest/recorded_rows.py), so its check starts from
Parquet: cold is a fresh process and a fresh Spark JVM, not a fresh parse.
A history without recorded rows (a crashed run's, an imported one, one a
bench generated) pays the JSONL -> Parquet conversion inside its check.
So each round measures, in fresh processes:

- ``recorded``: the history fed through the recorder in bursts of lines, as
  a run's writer feeds it (``RECORD``; timed on its own: a run pays it
  while recording, spread over the run), then ``kafka-chaos check`` from
  those rows;
- ``bare``: ``kafka-chaos check`` of the bare JSONL, conversion included;
- ``duckdb``: the four core queue checks in DuckDB on the same JSONL
  (bench/check_reference.py, a fresh process, its own parse included).

Steps alternate their order round by round, and with ``--rev`` the same two
Spark steps run for that revision too (``git archive``, as check_diff does).
Each step prints wall seconds and CPU seconds (the process's own, from
getrusage of children, plus its Spark JVM's, read from /proc as it runs:
the CLI never reaps the JVM), since this shared machine's load moves the
wall time far more than the CPU time.  Then each Spark step's ratio to
DuckDB of the same round, wall and CPU, whether every Spark output is
identical (check_diff's rule) and whether the four counts agree with
DuckDB's.  Figures only; the target is the issue's 3x.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import resource
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from check_diff import (  # noqa: E402
    WORKTREE,
    Tree,
    differences,
    export,
    normalized,
    outcome,
    tree_env,
)
from check_reference import CHECKS  # noqa: E402
from timed_check import watched  # noqa: E402


@dataclass
class Step:
    """One measured process: wall and CPU seconds, and what it printed."""

    wall: float
    cpu: float
    stdout: str = ""
    stderr: str = ""
    extra: dict[str, float] = field(default_factory=dict)


def measured(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> Step:
    """Run ``cmd``; its wall time and CPU (its own and its unreaped children's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, jvm, (rc, stdout, stderr) = watched(cmd, env, timeout, cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if rc not in (0, 1, 2):
        raise SystemExit(f"{' '.join(cmd[:4])} failed ({rc}): {stderr[-2000:]}")
    return Step(wall, own + jvm, stdout, stderr, {"jvm_cpu": jvm})


def fresh_copy(history: Path, config: Path | None, into: Path) -> Path:
    """A directory holding only the history (hard-linked when possible) and its config."""
    into.mkdir(parents=True)
    dest = into / "history.jsonl"
    try:
        os.link(history, dest)
    except OSError:
        shutil.copy(history, dest)
    if config:
        shutil.copy(config, into / "config.json")
    return dest


# A run's writer feeds the recorder bursts of lines at the run's pace, which
# it keeps up with.  Fed a 1e7-op file as fast as it reads, the recorder fell
# more than its 512 MB limit behind and dropped the Parquet (as it must: a
# run's memory is not the Parquet's to take); so the feeder here waits while
# 256 MB are queued, like a fast run.
RECORD = """
import sys, time
from importlib import import_module
recorder = import_module(sys.argv[1]).RowsRecorder(sys.argv[2])
with open(sys.argv[2], "rb") as fh:
    rest = b""
    while block := fh.read(1 << 16):
        cut = block.rfind(b"\\n") + 1
        if not cut:
            rest += block
            continue
        recorder.feed(rest + block[:cut])
        rest = block[cut:]
        while recorder._fed - recorder._taken > (256 << 20) and recorder.failed is None:
            time.sleep(0.01)
recorder.close()
recorder.wait()
if recorder.failed or rest:
    print(f"recording failed: {recorder.failed or 'a line cut short'}", file=sys.stderr)
    sys.exit(3)
"""


def spark_step(tree: Tree, mode: str, history: Path, config: Path | None,
               work: Path, timeout: float) -> Step:  # fmt: skip
    """``tree``'s check of a private copy of ``history``, ``bare`` or from ``recorded`` rows."""
    run = fresh_copy(history, config, work)
    env, rec = tree_env(tree), None
    if mode == "recorded":
        rec = measured([sys.executable, "-c", RECORD, tree.rows, str(run)], tree.path, env, timeout)
    cmd = [sys.executable, "-m", tree.cli, "check", str(run), "--json"]
    if config:
        cmd += ["--config", str(run.parent / "config.json")]
    step = measured(cmd, tree.path, env, timeout)
    shutil.rmtree(work)
    if mode == "recorded" and ": building it from" in step.stderr:
        raise SystemExit(f"{tree.label} did not check from the recorded rows: {step.stderr[-500:]}")
    if rec:
        step.extra.update(record_wall=rec.wall, record_cpu=rec.cpu)
    return step


def duckdb_step(history: Path, config: Path | None, timeout: float) -> tuple[Step, dict]:
    """bench/check_reference.py --no-spark in a fresh process, and its four counts."""
    cmd = [sys.executable, str(HERE / "check_reference.py"), str(history), "--no-spark"]
    if config:
        cmd += ["--config", str(config)]
    step = measured(cmd, HERE.parent, dict(os.environ), timeout)
    counts = re.search(r"duckdb: [\d.]+ s, (\{.*\})", step.stdout)
    if not counts:
        raise SystemExit(f"DuckDB printed no counts: {step.stdout[-500:]}{step.stderr[-500:]}")
    return step, ast.literal_eval(counts.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("history", type=Path, help="a queue history.jsonl")
    ap.add_argument("--config", type=Path, help="its run config")
    ap.add_argument("--rev", help="also measure this revision's checks (git), side by side")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args()
    if not args.history.is_file():
        raise SystemExit(f"{args.history}: no such file")
    if args.config and not args.config.is_file():
        raise SystemExit(f"{args.config}: no such file")
    work = Path(tempfile.mkdtemp(prefix="kc-check-cold-", dir=args.history.parent))
    try:
        trees = [export(WORKTREE, work / "unused")]
        if args.rev:
            trees.insert(0, export(args.rev, work / "rev"))
        steps = [("duckdb", None)] + [(mode, t) for t in trees for mode in ("recorded", "bare")]
        print(f"# {args.history} ({args.history.stat().st_size >> 20} MB), {args.rounds} rounds; "
              "wall s / CPU s (own + Spark JVM)", flush=True)  # fmt: skip
        first: dict | None = None
        ratios: dict[str, list[tuple[float, float]]] = {}
        for n in range(1, args.rounds + 1):
            order = steps if n % 2 else steps[::-1]
            got: dict[str, Step] = {}
            for mode, tree in order:
                if tree is None:
                    got["duckdb"], duck = duckdb_step(args.history, args.config, args.timeout)
                    continue
                name = f"{tree.label} {mode}"
                step = spark_step(tree, mode, args.history, args.config,
                                  work / f"r{n}", args.timeout)  # fmt: skip
                got[name] = step
            d = got["duckdb"]
            print(f"round {n}: duckdb {d.wall:.1f} / {d.cpu:.1f}; counts {duck}", flush=True)
            for name, step in got.items():
                if name == "duckdb":
                    continue
                output = outcome(0, step.stdout, step.stderr, step.wall).output
                same = first is None or not list(differences(normalized(first), normalized(output)))
                first = first or output
                agree = all(output["checks"][c]["count"] == duck[c] for c in CHECKS)
                rec = ""
                if "record_wall" in step.extra:
                    rec = (f" (recording beforehand {step.extra['record_wall']:.1f} / "
                           f"{step.extra['record_cpu']:.1f})")  # fmt: skip
                ratio = (step.wall / d.wall, step.cpu / d.cpu)
                ratios.setdefault(name, []).append(ratio)
                print(f"  {name}: {step.wall:.1f} / {step.cpu:.1f} (JVM "
                      f"{step.extra['jvm_cpu']:.1f}){rec}; x duckdb {ratio[0]:.1f} wall, "
                      f"{ratio[1]:.1f} CPU; output "
                      f"{'identical' if same else 'DIFFERENT'}, four counts "
                      f"{'agree' if agree else 'DISAGREE'}",
                      flush=True)  # fmt: skip
        print("median x duckdb (wall, CPU):")
        for name, pairs in ratios.items():
            print(f"  {name}: {statistics.median(p[0] for p in pairs):.1f}x, "
                  f"{statistics.median(p[1] for p in pairs):.1f}x (target 3x)")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
