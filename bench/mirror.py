"""Disaster recovery, measured: the mirror scenarios' RPO and re-reads, and MirrorMaker 2's
throughput against the source's.

    python bench/mirror.py --runs 3
    python bench/mirror.py --runs 1 --scenarios mirror-failover --throughput 0

Part 1 runs each mirror scenario ``--runs`` times (seeds 7000..) on one local
dc1 (``bench-mirror``, 3 nodes) with its dc2 and MirrorMaker node, and prints
per scenario: verdicts, the RPO (values dc2 lacked when the failover began,
and the seconds of writes they span; "unmeasured": acknowledged values in
partitions whose end dc2 did not give then), the values re-read after the failover,
skips, mirror losses, duplicates, and MirrorMaker's catch-up after the heal.
Each figure is min / median / max over the runs.

Part 2 (``--throughput N``, default 200000) writes N 100-byte messages to dc1
as fast as one producer can, with MirrorMaker copying a topic of 13
partitions, and prints the source's rate (acked on dc1) beside the mirror's
(on dc2, by high watermark, every 0.5 s) measured side by side in one run,
and their ratio.  The pair is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

from kafka_chaos.harness import admin, kafka_db, mirror_pair
from kafka_chaos.harness import mirror_maker as mm
from kafka_chaos.harness.backends import destroy_cluster, load_cluster
from kafka_chaos.harness.spec import ClusterSpec, TestSpec, TopicSpec
from kafka_chaos.workloads import mirror_spec

from kafka_chaos.options import build_spec
from kafka_chaos.run import ensure_cluster, run_test
from kafka_chaos.scenarios import SCENARIOS, scenario_layer

MIRROR_SCENARIOS = tuple(name for name in SCENARIOS if name.startswith("mirror-"))
CLUSTER = "bench-mirror"
SEED = 7000


def figures(run_dir: Path) -> dict:
    results = json.loads((run_dir / "results.json").read_text())
    stats, checks = results["stats"]["mirror"], results["checks"]

    def count(name: str) -> int:
        return int(checks[name].get("count") or 0)

    return {
        "verdict": results["verdict"],
        "rpo_values": stats.get("rpo_values", 0),
        "rpo_s": stats.get("rpo_seconds", 0.0),
        "unmeasured": stats.get("rpo_unmeasured", 0),
        "reread": count("failover-reread"),
        "skipped": count("failover-skip"),
        "lost": count("mirror-lost"),
        "duplicates": count("mirror-duplicate"),
        "catch_up_s": stats.get("catch_up_s") or 0.0,
        "acked_before": stats.get("acked_before", 0),
    }


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    lo, mid, hi = min(values), statistics.median(values), max(values)
    fmt = (
        (lambda x: f"{x:.0f}")
        if all(float(v).is_integer() for v in values)
        else (lambda x: f"{x:.1f}")
    )
    return fmt(mid) if lo == hi else f"{fmt(lo)} / {fmt(mid)} / {fmt(hi)}"


def scenarios(names: list[str], runs: int, store: Path) -> None:
    print(f"{'scenario':<20} {'runs':>4}  {'verdicts':<14} {'RPO values':<16} {'RPO s':<16} "
          f"{'unmeasured':<16} {'re-read':<18} {'skip':>4} {'lost':>4} {'dup':<10} "
          f"{'catch-up s':<14}")  # fmt: skip
    for name in names:
        rows = []
        for i in range(runs):
            spec = build_spec(scenario_layer(name), {"cluster": {"name": CLUSTER},
                                                     "seed": SEED + i})  # fmt: skip
            outcome = run_test(spec, store=store)
            rows.append(figures(outcome.run_dir.path))
            print(f"  {name} run {i + 1}: {rows[-1]}", file=sys.stderr)
        verdicts = ",".join(sorted({r["verdict"] for r in rows}))

        def col(key: str, rows: list[dict] = rows) -> str:
            return spread([r[key] for r in rows])

        print(f"{name:<20} {len(rows):>4}  {verdicts:<14} {col('rpo_values'):<16} "
              f"{col('rpo_s'):<16} {col('unmeasured'):<16} {col('reread'):<18} "
              f"{sum(r['skipped'] for r in rows):>4} {sum(r['lost'] for r in rows):>4} "
              f"{col('duplicates'):<10} {col('catch_up_s'):<14}")  # fmt: skip


def throughput(n: int) -> None:
    """Source and mirror rates, side by side, for one burst of ``n`` messages."""
    from confluent_kafka import Producer

    mirror = mirror_spec.MirrorSpec(enabled=True)
    spec = TestSpec(cluster=ClusterSpec(name=CLUSTER), sections={mirror_spec.NAME: mirror})
    dc1 = ensure_cluster(spec)
    pair = mirror_pair.ensure(dc1, spec.cluster, mirror_spec.of(spec).dc2_nodes)
    topic = TopicSpec(name=f"mirror-bench-{uuid.uuid4().hex[:6]}", partitions=13)
    try:
        admin.create_topic(dc1.bootstrap_servers(), topic, timeout_s=60)
        mm.configure(pair.mm_node, mirror_spec.of(spec), pair.endpoints, topic.name, "none",
                     spec.cluster.kafka_version)  # fmt: skip
        mm.stop(pair.mm_node)
        mm.start(pair.mm_node)
        dc2 = pair.dc2.bootstrap_servers()
        deadline = time.monotonic() + 90
        while len(admin.end_offsets(dc2, topic.name, 13, 5)) < 13:
            if time.monotonic() > deadline:
                raise SystemExit("MirrorMaker did not create dc2's copy within 90 s")
            time.sleep(1)
        producer = Producer({"bootstrap.servers": dc1.bootstrap_servers(), "linger.ms": 5,
                             "acks": "all", "enable.idempotence": True})  # fmt: skip
        payload = b"x" * 100
        t0 = time.monotonic()
        for i in range(n):
            while True:
                try:
                    producer.produce(topic.name, payload, partition=i % 13)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        producer.flush(120)
        source_s = time.monotonic() - t0
        mirrored_at = None
        while time.monotonic() - t0 < source_s + 600:
            copied = sum(admin.end_offsets(dc2, topic.name, 13, 5).values())
            if copied >= n:
                mirrored_at = time.monotonic() - t0
                break
            time.sleep(0.5)
        print(f"\nthroughput, {n} x 100 B, 13 partitions, one producer (acks=all):")
        print(f"  source (acked on dc1): {source_s:.1f} s, {n / source_s:,.0f} msg/s")
        if mirrored_at is None:
            print("  mirror: did not copy everything within 10 minutes")
        else:
            print(f"  mirror (on dc2):       {mirrored_at:.1f} s, {n / mirrored_at:,.0f} msg/s, "
                  f"{(n / mirrored_at) / (n / source_s):.2f}x the source's rate, "
                  f"{mirrored_at - source_s:.1f} s behind at the end")  # fmt: skip
    finally:
        mm.stop(pair.mm_node)
        pair.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scenarios", nargs="*", default=list(MIRROR_SCENARIOS))
    ap.add_argument("--throughput", type=int, default=200_000, help="0: skip part 2")
    ap.add_argument("--store", type=Path, default=Path("store-bench"))
    ap.add_argument("--keep", action="store_true", help="leave the clusters up")
    args = ap.parse_args()
    try:
        if args.runs:
            scenarios(args.scenarios, args.runs, args.store)
        if args.throughput:
            throughput(args.throughput)
    finally:
        if not args.keep:
            mirror_pair.destroy(CLUSTER)
            try:
                cluster = load_cluster(CLUSTER)
                kafka_db.stop_cluster(cluster)
                cluster.close()
            except Exception:  # never made, or gone
                pass
            destroy_cluster(CLUSTER)


if __name__ == "__main__":
    main()
