"""Whose bug is it: re-run kept findings on each client, N times, on one schedule.

For each ``evidence/`` directory it rebuilds the finding's run from its
``config.json`` (seed, settings) and replays its ``schedule.json`` (the same
faults at the same times), once per client and ``--runs`` times each, on one
local cluster of the finding's Kafka version.  The anomaly to look for is the
finding's own: the checks that failed in its ``results.json``.  It prints,
per finding and client, how many runs showed each of those checks, with a
95 % Wilson interval, and where the runs are; then, per finding and pair of
clients, a two-sided Fisher exact p with the counts.  A finding's README may
call it one client's only when p < 0.05 (or a client's own log shows the
mechanism); otherwise it says "undetermined".

    python bench/attribution.py evidence/share-* --runs 5

Share-group findings need the Java share consumer, queue findings the Java
producer and consumer; Java runs go in a child process (one JVM per process).
Runs go to ``--store``; the cluster is destroyed at the end.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kafka_chaos.harness.backends import destroy_cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.rates import comparison_text, wilson

from kafka_chaos.child_run import needs_own_process, run_in_child
from kafka_chaos.engine import shared_engine
from kafka_chaos.options import add_debug_options, build_spec, debug_overrides
from kafka_chaos.run import run_test

CLIENTS = ("librdkafka", "java")
CLUSTER = "attribution"


def finding(
    evidence: Path, debug: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The finding's run options (metadata dropped, schedule replayed, ``debug`` logs
    as asked: --client-debug, --broker-debug) and its failed checks."""
    config = json.loads((evidence / "config.json").read_text())
    schedule = json.loads((evidence / "schedule.json").read_text())
    results = json.loads((evidence / "results.json").read_text())
    failed = sorted(n for n, c in results["checks"].items() if c.get("valid") is False)
    spec = build_spec(config, debug or {})  # validates, and drops nothing it needs
    layer = spec.to_dict()
    layer["nemesis"]["schedule"] = schedule["ops"]
    layer["cluster"] = {**layer["cluster"], "name": CLUSTER, "backend": "local"}
    return layer, failed


def run_once(layer: dict[str, Any], client: str, store: Path, name: str) -> dict[str, int] | str:
    """One run on ``client``: its anomaly counts by check, or a harness error's text."""
    spec = build_spec(
        layer, {"name": name, "producer": {"client": client}, "consumer": {"client": client}}
    )
    try:
        outcome = run_in_child(spec, store) if needs_own_process(spec) else run_test(spec, store)
    except HarnessError as e:
        return f"harness error: {e}"
    results = json.loads((outcome.run_dir.path / "results.json").read_text())
    return {n: c.get("count", 0) for n, c in results["checks"].items() if c.get("valid") is False}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evidence", type=Path, nargs="+", help="evidence/<finding> directories")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--store", type=Path, default=Path("store-bench"))
    add_debug_options(parser)
    args = parser.parse_args()
    clients = args.clients.split(",")
    table = []
    try:
        with shared_engine():  # every replay's check on one warm Spark
            for evidence in args.evidence:
                layer, failed = finding(evidence, debug_overrides(args))
                for client in clients:
                    outcomes = []
                    for i in range(args.runs):
                        got = run_once(layer, client, args.store, f"attr-{evidence.name}-{client}")
                        outcomes.append(got)
                        print(f"{evidence.name} {client} run {i + 1}: {got}", flush=True)
                    table.append((evidence.name, client, failed, outcomes))
    finally:
        destroy_cluster(CLUSTER)
    print()
    print("| finding | client | runs | reproduced (any of its checks) | rate, 95 % interval "
          "| each check: runs that showed it | harness errors |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, client, failed, outcomes in table:
        runs = [o for o in outcomes if isinstance(o, dict)]
        hits, _ = reproduced(failed, outcomes)
        rate = "-"
        if runs:
            lo, hi = wilson(hits, len(runs))
            rate = f"{hits / len(runs):.0%} ({lo:.0%}-{hi:.0%})"
        each = ", ".join(f"{c} {sum(1 for o in runs if o.get(c))}" for c in failed)
        errors = len(outcomes) - len(runs)
        print(f"| {name} | {client} | {len(runs)} | {hits} | {rate} | {each} | {errors} |")
    print()
    for line in comparisons(table):
        print(line)


def reproduced(failed: list[str], outcomes: list[dict[str, int] | str]) -> tuple[int, int]:
    """(runs showing any of the finding's checks, runs with a verdict)."""
    runs = [o for o in outcomes if isinstance(o, dict)]
    return sum(1 for o in runs if any(o.get(c) for c in failed)), len(runs)


def comparisons(table: list[tuple[str, str, list[str], list]]) -> list[str]:
    """Per finding, every pair of clients compared by a two-sided Fisher exact test."""
    lines = []
    by_finding: dict[str, list[tuple[str, int, int]]] = {}
    for name, client, failed, outcomes in table:
        hits, n = reproduced(failed, outcomes)
        if n:
            by_finding.setdefault(name, []).append((client, hits, n))
    for name, cells in by_finding.items():
        for i, (a, hits_a, n_a) in enumerate(cells):
            for b, hits_b, n_b in cells[i + 1 :]:
                lines.append(f"{name}: {comparison_text(a, hits_a, n_a, b, hits_b, n_b)}")
    return lines


if __name__ == "__main__":
    main()
