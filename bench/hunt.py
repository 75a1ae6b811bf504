"""The hunts, measured: each hunt scenario N times per Kafka version and client.

    python bench/hunt.py --runs 5
    python bench/hunt.py --runs 2 --scenarios hunt-txn-stale-endtxn --versions 4.4.0

Prints one table: scenario x Kafka version x client -> runs, the runs that
found each anomaly (a check that failed, whatever its severity's verdict),
the rate of runs with any anomaly with a 95 % Wilson interval, and the
operations recorded (history lines, all runs together).  Seeds are
5000..5000+N-1, the same for every cell, so two cells differ only in
version or client.  Zeros are reported as zeros.

Each version gets one local cluster (``hunt-<version>``), destroyed at the
end; Java runs go in a child process (one JVM per process).  Runs go to
``--store`` (default ``store-bench/``); a finding worth keeping is copied to
``evidence/`` by hand, with its README, and shrunk (docs/shrinking.md).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from harness.backends import destroy_cluster
from harness.errors import HarnessError
from harness.rates import rate_text
from kafka_chaos.child_run import needs_own_process, run_in_child
from kafka_chaos.options import build_spec
from kafka_chaos.run import run_test
from kafka_chaos.scenarios import SCENARIOS, scenario_layer

HUNTS = tuple(name for name in SCENARIOS if name.startswith("hunt-"))
CLIENTS = ("librdkafka", "java")
SEED = 5000


def found(run_dir: Path) -> tuple[set[str], int]:
    """The checks that found something in one run, and its history's operations."""
    results = json.loads((run_dir / "results.json").read_text())
    anomalies = {n for n, c in results["checks"].items() if c.get("count", 0) > 0}
    with open(run_dir / "history.jsonl", "rb") as f:
        return anomalies, sum(1 for _ in f)


def run_cell(scenario: str, version: str, client: str, runs: int, store: Path) -> dict:
    seen: Counter[str] = Counter()
    hits = operations = errors = 0
    for i in range(runs):
        spec = build_spec(
            scenario_layer(scenario),
            {"cluster": {"name": f"hunt-{version.replace('.', '')}", "kafka_version": version},
             "producer": {"client": client}, "consumer": {"client": client},
             "seed": SEED + i},
        )  # fmt: skip
        try:
            outcome = (
                run_in_child(spec, store) if needs_own_process(spec) else run_test(spec, store)
            )
            anomalies, ops = found(outcome.run_dir.path)
        except (HarnessError, OSError) as e:
            errors += 1
            print(f"  {scenario} {version} {client} run {i + 1}: no verdict ({e})", flush=True)
            continue
        seen.update(anomalies)
        hits += bool(anomalies)
        operations += ops
        print(f"  {scenario} {version} {client} run {i + 1}: {sorted(anomalies) or 'nothing'}",
              flush=True)  # fmt: skip
    return {"runs": runs - errors, "hits": hits, "seen": seen, "operations": operations}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scenarios", default=",".join(HUNTS))
    parser.add_argument("--versions", default="4.4.0")
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--store", type=Path, default=Path("store-bench"))
    args = parser.parse_args()
    rows = []
    for version in args.versions.split(","):
        try:
            for scenario in args.scenarios.split(","):
                for client in args.clients.split(","):
                    cell = run_cell(scenario, version, client, args.runs, args.store)
                    rows.append((scenario, version, client, cell))
        finally:
            destroy_cluster(f"hunt-{version.replace('.', '')}")
    print()
    print("| scenario | Kafka | client | runs | runs finding each anomaly | "
          "runs with any, 95 % interval | operations |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for scenario, version, client, c in rows:
        each = ", ".join(f"{n} {k}" for n, k in sorted(c["seen"].items())) or "none"
        rate = rate_text(c["hits"], c["runs"]) if c["runs"] else "no verdict"
        print(f"| {scenario} | {version} | {client} | {c['runs']} | {each} | {rate} | "
              f"{c['operations']} |")  # fmt: skip


if __name__ == "__main__":
    main()
