"""Share groups under faults: run the share-group presets N times and say what was found.

Per preset it prints how many runs met their expected verdict, every share
check that found anything (with the run directories, whose reports keep the
evidence), the acknowledgements whose outcome stayed unknown, and the
delivery-latency figures from ``results.json``'s share statistics.

    python bench/share_groups.py --runs 3
    python bench/share_groups.py --runs 5 --presets share-group-broker-kill

Runs go to ``store-bench/``; one cluster (``share-<version>``) serves every
run and is destroyed at the end.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from kafka_chaos.harness.backends import destroy_cluster
from kafka_chaos.harness.spec import NEWEST_KAFKA

from kafka_chaos.options import build_spec
from kafka_chaos.run import run_test
from kafka_chaos.scenarios import scenario_layer

PRESETS = "pubsub-vs-queue-share,share-group-consumer-crash,share-group-broker-kill"


def findings(run_dir: Path) -> tuple[dict[str, int], int, dict]:
    """Share anomalies by check, acks with unknown outcome, and the share statistics."""
    results = json.loads((run_dir / "results.json").read_text())
    found = {
        name: c["count"]
        for name, c in results["checks"].items()
        if name.startswith("share-") and c.get("count")
    }
    undecided = results["checks"].get("share-lost", {}).get("undecided", 0)
    return found, undecided, results.get("stats", {}).get("share", {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--presets", default=PRESETS)
    parser.add_argument("--version", default=NEWEST_KAFKA)
    parser.add_argument("--store", type=Path, default=Path("store-bench"))
    args = parser.parse_args()
    cluster = f"share-{args.version.replace('.', '')}"
    rows = []
    try:
        for preset in args.presets.split(","):
            held, anomalies, undecided, kept = 0, Counter(), 0, []
            for i in range(args.runs):
                spec = build_spec(
                    scenario_layer(preset),
                    {"cluster": {"name": cluster, "kafka_version": args.version}, "seed": 3000 + i},
                )
                outcome = run_test(spec, store=args.store)
                held += bool(outcome.expectation_held)
                found, unknown_acks, stats = findings(outcome.run_dir.path)
                anomalies.update(found)
                undecided += unknown_acks
                if found:
                    kept.append(str(outcome.run_dir.path))
                print(
                    f"  {preset} run {i + 1}: verdict={outcome.verdict} found={found or 'none'} "
                    f"undecided={unknown_acks} stats={json.dumps(stats)[:300]}",
                    flush=True,
                )
            rows.append((preset, held, dict(anomalies), undecided, kept))
    finally:
        destroy_cluster(cluster)
    print()
    print("| preset | expectation held | share anomalies found | acks of unknown outcome |")
    print("|---|---|---|---|")
    for preset, held, anomalies, undecided, _ in rows:
        print(f"| {preset} | {held}/{args.runs} | {anomalies or 'none'} | {undecided} |")
    for preset, _, _, _, kept in rows:
        for path in kept:
            print(f"kept: {preset}: {path}")


if __name__ == "__main__":
    main()
