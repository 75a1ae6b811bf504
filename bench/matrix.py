"""The version/protocol matrix, N times: every cell of ``suites/matrix.yaml`` run
``--runs`` times, with the verdicts, acknowledged and lost counts and the
longest stretch without an acknowledged send per cell.

    python bench/matrix.py --runs 3

Each round runs the suite's cells in the suite's order (so a cluster is
recreated only where the version or mode changes), with seed ``4000 + round``;
a cell's runs therefore see the machine in the same state as each other.
Runs go to ``store-bench/``, and the cluster is destroyed at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from kafka_chaos.harness.backends import destroy_cluster
from kafka_chaos.harness.errors import HarnessError

from kafka_chaos.child_run import needs_own_process, run_in_child
from kafka_chaos.options import build_spec
from kafka_chaos.run import run_test
from kafka_chaos.suite import load_suite

SUITE = Path(__file__).resolve().parent.parent / "suites" / "matrix.yaml"


def cell_figures(run_dir: Path) -> dict:
    """The figures of one run, from its results.json."""
    results = json.loads((run_dir / "results.json").read_text())
    summary = results.get("summary", {})
    gap = results.get("stats", {}).get("availability", {}).get("longest_gap_s")
    errors = sorted(
        name
        for name, c in results.get("checks", {}).items()
        if c.get("count") and c.get("severity") == "error"
    )
    return {
        "verdict": results.get("verdict"),
        "acked": summary.get("acked"),
        "lost": summary.get("acked_lost"),
        "gap_s": gap,
        "errors": errors,
        "run_dir": str(run_dir),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--suite", type=Path, default=SUITE)
    parser.add_argument("--store", type=Path, default=Path("store-bench"))
    args = parser.parse_args()
    _, _, entries = load_suite(args.suite)
    per_cell: dict[str, list[dict]] = {e.name: [] for e in entries}
    clients = {e.name: build_spec(*e.layers).producer.client for e in entries}
    clusters = set()
    try:
        for r in range(args.runs):
            for entry in entries:
                spec = build_spec(*entry.layers, {"seed": 4000 + r})
                clusters.add(spec.cluster.name)
                try:
                    if needs_own_process(spec):  # the Java client pins its process's JVM
                        outcome = run_in_child(spec, args.store)
                    else:
                        outcome = run_test(spec, store=args.store)
                except HarnessError as e:
                    per_cell[entry.name].append({"verdict": f"harness error: {e}"})
                    print(f"round {r + 1} {entry.name}: harness error: {e}", flush=True)
                    continue
                figures = cell_figures(outcome.run_dir.path)
                per_cell[entry.name].append(figures)
                print(f"round {r + 1} {entry.name}: {json.dumps(figures)}", flush=True)
    finally:
        for name in clusters:
            destroy_cluster(name)
    print()
    print(
        "| cell | client | runs valid | acknowledged / lost, per run | longest stretch without an "
        "acked send: median / max | errors found |"
    )
    print("|---|---|---|---|---|---|")
    for name, runs in per_cell.items():
        valid = sum(1 for f in runs if f.get("verdict") == "valid")
        counts = ", ".join(f"{f.get('acked')} / {f.get('lost')}" for f in runs)
        gaps = [f["gap_s"] for f in runs if f.get("gap_s") is not None]
        gap = f"{statistics.median(gaps):.1f} s / {max(gaps):.1f} s" if gaps else "-"
        errors = sorted({e for f in runs for e in f.get("errors", [])}) or ["none"]
        found = ", ".join(errors)
        print(f"| {name} | {clients[name]} | {valid}/{len(runs)} | {counts} | {gap} | {found} |")


if __name__ == "__main__":
    main()
