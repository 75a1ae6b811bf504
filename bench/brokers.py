"""Tansu beside Apache Kafka: each Tansu scenario N times on both brokers, one table.

    python bench/brokers.py --runs 5 --time-limit 30

Each scenario of ``TANSU_SCENARIOS`` (kafka_chaos/scenarios.py) runs on Tansu
(cluster ``--tansu-cluster``) and on its Kafka twin (``--kafka-cluster``,
Apache Kafka ``--kafka-version``): the same workload, producer and faults,
less the faults Kafka refuses (the storage faults: Kafka has no storage
node).  A scenario left with no fault on Kafka has no twin, and its Kafka row
says "n/a".  Rounds run every cell once, so a bench cut short still has
balanced counts; each run holds ``/tmp/kc-itest.lock`` (one cluster run on
the machine at a time), and its figures are appended to ``--out`` as it
ends, so ``--table-only`` prints the table of runs already made.

Per cell: verdict counts, mean acknowledged sends, acknowledged sends lost
(total, and in how many runs), and the share of runs not valid with its 95 %
Wilson interval (``harness/rates.py``).  The runs go through the suite's own
``run_entry`` on one shared Spark (``kafka_chaos/engine.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from kafka_chaos.harness import broker
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.rates import rate_text

from kafka_chaos.engine import shared_engine
from kafka_chaos.options import build_spec
from kafka_chaos.scenarios import scenario_layer
from kafka_chaos.suite import run_entry

sys.path.insert(0, str(Path(__file__).resolve().parent))
from power_loss import held  # noqa: E402  (the bench's flock, one copy)

TANSU_SCENARIOS = ("tansu-broker-kill", "tansu-storage-partition", "tansu-idempotent")
BROKERS = ("tansu", "kafka")
LOCK = Path("/tmp/kc-itest.lock")


def twin_layer(name: str, kafka_version: str) -> dict[str, Any] | None:
    """The scenario on Apache Kafka: its faults less those Kafka refuses; None if none is left."""
    layer = scenario_layer(name)
    refused = broker.named("kafka").refused_faults
    faults = [f for f in layer["nemesis"]["faults"] if f not in refused]
    if not faults:
        return None
    return {
        **layer,
        "cluster": {**layer.get("cluster", {}), "broker": "kafka", "kafka_version": kafka_version},
        "nemesis": {**layer["nemesis"], "faults": faults},
    }


def cell_layer(
    name: str, on: str, cluster: str, time_limit_s: float, seed: int, kafka_version: str
) -> dict[str, Any] | None:
    """One run's options: the scenario (or its Kafka twin) on ``cluster``."""
    base = scenario_layer(name) if on == "tansu" else twin_layer(name, kafka_version)
    if base is None:
        return None
    return {
        **base,
        "name": f"{name}-{on}",
        "seed": seed,
        "time_limit_s": time_limit_s,
        "cluster": {**base.get("cluster", {}), "name": cluster},
    }


def figures(run_dir: Path) -> dict[str, Any]:
    """Verdict, acked and lost of one run, from its results.json."""
    try:
        results = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        return {"verdict": None, "run_dir": str(run_dir)}
    summary = results.get("summary") or {}
    return {
        "verdict": results.get("verdict"),
        "acked": summary.get("acked"),
        "lost": summary.get("acked_lost"),
        "run_dir": str(run_dir),
    }


def cell_row(scenario: str, on: str, runs: list[dict[str, Any]] | None) -> str:
    """A markdown row; ``runs`` None: the cell does not exist (no Kafka twin)."""
    head = f"| {scenario} | {on} "
    if runs is None:
        return head + "| n/a | n/a | n/a | n/a | n/a | n/a | n/a |"
    if not runs:
        return head + "| 0 | — | — | — | — | — | — |"
    n = len(runs)
    counts = {v: sum(1 for r in runs if r.get("verdict") == v) for v in ("valid", "invalid")}
    other = n - counts["valid"] - counts["invalid"]  # unknown, or no verdict at all
    acked = [r["acked"] for r in runs if isinstance(r.get("acked"), int)]
    lost = [r["lost"] for r in runs if isinstance(r.get("lost"), int)]
    acked_text = f"{statistics.fmean(acked):,.0f}" if acked else "—"
    hit = sum(1 for x in lost if x > 0)
    lost_text = f"{sum(lost):,} ({hit} of {len(lost)} runs)" if lost else "—"
    return (
        head + f"| {n} | {counts['valid']} | {counts['invalid']} | {other} "
        f"| {acked_text} | {lost_text} | {rate_text(n - counts['valid'], n)} |"
    )


TABLE_HEAD = (
    "| scenario | broker | runs | valid | invalid | unknown | acked (mean) "
    "| acked lost (total, runs) | not valid (95 % Wilson) |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def table(records: list[dict[str, Any]], kafka_version: str) -> str:
    """The side-by-side table of ``records`` (one per run: scenario, broker, figures)."""
    rows = [TABLE_HEAD]
    for name in TANSU_SCENARIOS:
        for on in BROKERS:
            runs = [r for r in records if r["scenario"] == name and r["broker"] == on]
            exists = on == "tansu" or twin_layer(name, kafka_version) is not None
            label = "tansu 0.6.0" if on == "tansu" else f"kafka {kafka_version}"
            rows.append(cell_row(name, label, runs if exists else None))
    return "\n".join(rows)


def one_run(layer: dict[str, Any], store: Path) -> dict[str, Any]:
    """One run under the machine's cluster lock; a harness error is its verdict."""
    with held(LOCK):
        try:
            outcome = run_entry(build_spec(layer), store)
        except HarnessError as e:
            return {"verdict": f"harness error: {e}"}
    return figures(outcome.run_dir.path)


def read_records(out: Path) -> list[dict[str, Any]]:
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5, help="runs per scenario and broker")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds of workload a run")
    p.add_argument("--tansu-cluster", default="kc-bench-tansu")
    p.add_argument("--kafka-cluster", default="kc-bench-kafka")
    p.add_argument("--kafka-version", default="4.4.0")
    p.add_argument("--store", type=Path, default=Path("store-bench"))
    p.add_argument("--out", type=Path, default=None, help="runs as JSON lines (appended)")
    p.add_argument(
        "--first-round",
        type=int,
        default=0,
        help="number of the first round (its seed is 7000 + round), to add rounds",
    )
    p.add_argument("--only", default="", help="comma-separated brokers to run (tansu,kafka)")
    p.add_argument("--table-only", action="store_true", help="print the table of --out, run none")
    args = p.parse_args(argv)
    out = args.out or args.store / "brokers-runs.jsonl"
    if args.runs < 1:
        print("brokers.py: --runs must be at least 1", file=sys.stderr)
        return 2
    only = [b.strip() for b in args.only.split(",") if b.strip()] or list(BROKERS)
    if set(only) - set(BROKERS):
        print(f"brokers.py: --only takes {', '.join(BROKERS)}", file=sys.stderr)
        return 2
    if not args.table_only:
        clusters = {"tansu": args.tansu_cluster, "kafka": args.kafka_cluster}
        out.parent.mkdir(parents=True, exist_ok=True)
        with shared_engine():
            for round_no in range(args.first_round, args.first_round + args.runs):
                for name in TANSU_SCENARIOS:
                    for on in only:
                        layer = cell_layer(
                            name,
                            on,
                            clusters[on],
                            args.time_limit,
                            7000 + round_no,
                            args.kafka_version,
                        )
                        if layer is None:
                            continue
                        record = {
                            "scenario": name,
                            "broker": on,
                            "round": round_no,
                            "time_limit_s": args.time_limit,
                            **one_run(layer, args.store),
                        }
                        with out.open("a") as f:
                            f.write(json.dumps(record) + "\n")
                        print(
                            f"{name} on {on}, round {round_no}: {record['verdict']} "
                            f"acked={record.get('acked')} lost={record.get('lost')} "
                            f"{record.get('run_dir', '')}",
                            flush=True,
                        )
    print(table(read_records(out), args.kafka_version))
    return 0


if __name__ == "__main__":
    code = main()
    # After a bench of runs, threads its runs left behind (the Spark Connect
    # client's grpc threads among them) kept the interpreter from exiting for
    # 15 minutes after the table was printed; every record is written by then.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
