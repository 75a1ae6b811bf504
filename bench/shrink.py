"""Shrinking benchmark: the unclean-leader-election scenario, from one failing run
to its minimal reproduction on a real cluster.

Runs the scenario once (or takes ``--run RUN_DIR``), then ``kafka-chaos shrink``
on it, and prints: runs spent, wall time, the reproduction rate of the result
(its confirming runs, with a 95 % Wilson interval), and the start and final
sizes: faults, seconds, and operations, counted as the history lines of the
source run and of the shrunk run.

    python bench/shrink.py --budget 30m --repeat 1 --confirm 3
    python bench/shrink.py --run store-bench/unclean-leader-election/<stamp>

The cluster is ``bench-shrink`` (4.4.0, KRaft), destroyed at the end unless
``--keep-cluster``; runs go to ``store-bench/``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from kafka_chaos.harness.backends import destroy_cluster
from kafka_chaos.harness.rates import rate_text

from kafka_chaos.options import build_spec
from kafka_chaos.run import run_test
from kafka_chaos.scenarios import scenario_layer

SCENARIO = "unclean-leader-election"
CLUSTER = "bench-shrink"


def operations(run_dir: Path) -> int:
    """The run's history, in operations (one line each)."""
    with open(run_dir / "history.jsonl", "rb") as f:
        return sum(1 for _ in f)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="shrink this failing run instead of a new one")
    parser.add_argument("--budget", default="30m")
    parser.add_argument("--max-runs", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--confirm", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--store", type=Path, default=Path("store-bench"))
    parser.add_argument("--keep-cluster", action="store_true")
    args = parser.parse_args()
    started = time.monotonic()
    try:
        source = args.run
        if source is None:
            spec = build_spec(
                scenario_layer(SCENARIO),
                {"cluster": {"name": CLUSTER, "kafka_version": "4.4.0"}, "seed": args.seed},
            )
            source = run_test(spec, store=args.store).run_dir.path
            print(f"source run: {source} ({time.monotonic() - started:.0f} s)", flush=True)
        shrink_started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "kafka_chaos.cli", "shrink", str(source),
             "--budget", args.budget, "--max-runs", str(args.max_runs),
             "--repeat", str(args.repeat), "--confirm", str(args.confirm),
             "--store", str(args.store)],
            check=False,
        )  # fmt: skip
        wall = time.monotonic() - shrink_started
    finally:
        if args.run is None and not args.keep_cluster:
            destroy_cluster(CLUSTER)
    if proc.returncode != 0:
        sys.exit(f"shrink exited {proc.returncode}")
    log = json.loads((source / "shrink.json").read_text())
    kept = [s for s in log["steps"] if s["kept"]]
    # A kept candidate's judging stops at its k-th failure: its last run failed.
    shrunk = Path(kept[-1]["runs"][-1]["run"]) if kept else None
    confirm = (log.get("confirm") or {}).get("runs", [])
    start, result = log["start"]["size"], log["result"]["size"]
    print()
    print("| | faults | seconds | operations (history lines) |")
    print("|---|---|---|---|")
    print(f"| start | {start['faults']} | {start['seconds']:g} | {operations(source)} |")
    final_ops = operations(shrunk) if shrunk else operations(source)
    print(f"| final | {result['faults']} | {result['seconds']:g} | {final_ops} |")
    print()
    print(f"runs spent: {log['runs']} in the search + {len(confirm)} confirming")
    print(f"wall time: {wall / 60:.1f} min ({log['stop_reason']})")
    print(f"cuts kept: {'; '.join(s['what'] for s in kept) or 'none'}")
    if confirm:
        print(f"result reproduces {rate_text(sum(r['failed'] for r in confirm), len(confirm))}")


if __name__ == "__main__":
    main()
