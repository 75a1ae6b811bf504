"""Hunt the KAFKA-17754 class: run ``txn-pause-hunt`` N times per Kafka version.

KAFKA-17754: a delayed EndTxn or Produce applies to a *later* transaction
of the same producer id and epoch, giving lost writes, aborted reads and
torn transactions.  Kafka 4.x fixes it with a new epoch per transaction
(KIP-890 part 2), but librdkafka does not speak that protocol, so with
confluent-kafka clients 4.x may still show it.  This measures it, whatever
it finds, and prints one table row per version:

    python bench/txn_hunt.py --runs 5
    python bench/txn_hunt.py --runs 10 --versions 4.4.0 --time-limit 90

Each version gets its own cluster (``hunt-<version>``), destroyed at the end.
Runs go to ``store-bench/`` so the user's store stays clean; a run that finds
an anomaly keeps its report there (its path is printed).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kafka_chaos.harness.backends import destroy_cluster
from kafka_chaos.harness.spec import KAFKA_39, NEWEST_KAFKA

from kafka_chaos.options import build_spec
from kafka_chaos.run import run_test
from kafka_chaos.scenarios import scenario_layer

HUNTED = ("aborted-read", "lost-write", "torn-transaction")
SCENARIO = "txn-pause-hunt"


def findings(run_dir: Path) -> dict:
    """Counts of the hunted anomalies, any other anomaly, and what the run did."""
    results = json.loads((run_dir / "results.json").read_text())
    checks = results["checks"]
    found = {c: checks.get(c, {}).get("count", 0) for c in HUNTED}
    other = sorted(
        name
        for name, c in checks.items()
        if name not in HUNTED and c["valid"] is False and c.get("severity") == "error"
    )
    txns = {"ok": 0, "fail": 0, "info": 0}
    pauses = 0
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        op = json.loads(line)
        if op["f"] == "txn" and op["type"] in txns:
            txns[op["type"]] += 1
        elif op["process"] == "nemesis" and op["value"].get("phase") == "start":
            pauses += "error" not in op["value"]
    return {
        "verdict": results["verdict"],
        "found": found,
        "other": other,
        "txns": txns,
        "faults": pauses,
    }


def hunt(version: str, runs: int, time_limit: float, store: Path) -> list[dict]:
    cluster = f"hunt-{version.replace('.', '')}"
    layers = [
        scenario_layer(SCENARIO),
        {"cluster": {"name": cluster, "kafka_version": version}, "time_limit_s": time_limit},
    ]
    out = []
    try:
        for i in range(runs):
            started = time.monotonic()
            outcome = run_test(build_spec(*layers, {"seed": 2000 + i}), store=store)
            if outcome.verdict is None:
                print(f"  {version} run {i + 1}: no verdict ({outcome})", flush=True)
                continue
            f = findings(outcome.run_dir.path)
            f["seconds"] = time.monotonic() - started
            f["report"] = str(outcome.run_dir.path / "report.html")
            out.append(f)
            print(
                f"  {version} run {i + 1}: {f['verdict']} {f['found']} other={f['other']} "
                f"txns={f['txns']} faults={f['faults']} ({f['seconds']:.0f} s) {f['report']}",
                flush=True,
            )
    finally:
        destroy_cluster(cluster)
    return out


def _rate(runs: list[dict], pred) -> str:
    hits = sum(1 for r in runs if pred(r))
    return f"{hits}/{len(runs)}" if runs else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--versions", default=f"{KAFKA_39},{NEWEST_KAFKA}")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--store", type=Path, default=Path("store-bench"))
    args = parser.parse_args()
    table = {v: hunt(v, args.runs, args.time_limit, args.store) for v in args.versions.split(",")}
    print()
    print(
        "| Kafka | runs | aborted reads | lost writes | torn txns | any hunted | "
        "other errors | txns ok/fail/info (mean) | faults applied (mean) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for version, runs in table.items():
        n = max(1, len(runs))
        mean = {k: sum(r["txns"][k] for r in runs) / n for k in ("ok", "fail", "info")}
        others = sorted({o for r in runs for o in r["other"]}) or ["none"]
        print(
            f"| {version} | {len(runs)} | "
            f"{_rate(runs, lambda r: r['found']['aborted-read'])} | "
            f"{_rate(runs, lambda r: r['found']['lost-write'])} | "
            f"{_rate(runs, lambda r: r['found']['torn-transaction'])} | "
            f"{_rate(runs, lambda r: any(r['found'].values()))} | {', '.join(others)} | "
            f"{mean['ok']:.0f}/{mean['fail']:.0f}/{mean['info']:.0f} | "
            f"{sum(r['faults'] for r in runs) / n:.1f} |"
        )


if __name__ == "__main__":
    main()
