"""Highest sustained acked send rate with full history recording, vs Kafka's own tool.

Brings up (or reuses with --reuse) a local 3-node cluster, runs the queue
workload's producers unpaced for --seconds with acks/idempotence as given,
once per client (librdkafka, and Kafka's Java client through JPype), and runs
``org.apache.kafka.tools.ProducerPerformance`` from the cached distribution
(before and after, same cluster and settings); prints the rates and each
client's ratio to the tool (target >= 0.5).  Prints figures; asserts nothing.

    python bench/throughput.py [--name c1] [--seconds 20] [--workers 1] [--reuse]
                               [--client librdkafka|java|both]
                               [--perf-prop batch.size=1000000 ...]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kafka_chaos.harness import admin
from kafka_chaos.harness.cluster import Cluster, cluster_dir
from kafka_chaos.harness.distribution import load_cached
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.spec import NEWEST_KAFKA, TestSpec
from kafka_chaos.workloads.producer import UNLIMITED_MAX_OUTSTANDING
from kafka_chaos.workloads.queue import QueueWorkload

WARMUP_S = 2.0
PERF_LINE = re.compile(r"(\d+) records sent, ([\d.]+) records/sec")
# Both clients get the same acks, idempotence, linger.ms, max in flight and
# timeouts; everything else is each client's default, which differ:
DEFAULTS_DIFFER = (
    "batch size: librdkafka batch.size 1,000,000 B / batch.num.messages 10,000, "
    f"Java batch.size 16,384 B; queue: workload keeps <= {UNLIMITED_MAX_OUTSTANDING:,} "
    "messages outstanding "
    "(librdkafka queue.buffering.max.messages 100,000), Java buffer.memory 32 MiB; "
    "records: workload sends a 1-2 byte key to an explicit partition (value round robin), "
    "ProducerPerformance no key (sticky partitioner)"
)


def cli(*args: str, timeout: float) -> None:
    subprocess.run(["kafka-chaos", *args], check=True, timeout=timeout)


def workload_rate(spec: TestSpec, bootstrap: str, seconds: float) -> dict[str, float]:
    """Unpaced producers with full recording; the rate of acks after warm-up."""
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        run = Path(tmp)
        cpu0 = time.process_time()
        with HistoryWriter(run / "history.jsonl") as history:
            workload = QueueWorkload(spec, bootstrap, history, run, live=False)
            workload.start()
            time.sleep(seconds)
            summary = workload.stop()
        cpu = time.process_time() - cpu0
        acks = []
        with open(run / "history.jsonl", encoding="utf-8") as fh:
            for line in fh:
                if '"type":"ok","f":"send"' in line:
                    acks.append(json.loads(line)["time"] / 1e9)
        steady = [t for t in acks if WARMUP_S <= t <= seconds]
        lines = sum(1 for _ in open(run / "history.jsonl", encoding="utf-8"))
    return {
        "acked_rate": len(steady) / (seconds - WARMUP_S),
        "acked": summary.sends_ok,
        "failed": summary.sends_fail,
        "indeterminate": summary.sends_info,
        "history_lines": lines,
        "cpu_us_per_msg": cpu / max(1, summary.sends_ok) * 1e6,
    }


def perf_rate(
    spec: TestSpec, bootstrap: str, records: int, timeout_s: float, extra: list[str]
) -> dict[str, float]:
    """Kafka's ProducerPerformance from the host, same acks/idempotence/size/linger.

    ``extra`` are further ``key=value`` producer properties (``--perf-prop``).
    """
    dist = load_cached(spec.cluster.kafka_version)
    if dist is None:
        raise SystemExit(f"Kafka {spec.cluster.kafka_version} is not cached; run dist fetch")
    sub = "tools" if dist.tools_version else "libs"
    p = spec.producer
    props = [
        f"bootstrap.servers={bootstrap}",
        f"acks={p.acks}",
        f"enable.idempotence={str(p.enable_idempotence).lower()}",
        f"linger.ms={p.linger_ms}",
        f"max.in.flight.requests.per.connection={p.max_in_flight}",
        f"request.timeout.ms={p.request_timeout_ms}",
        f"delivery.timeout.ms={p.delivery_timeout_ms}",
        *extra,
    ]
    cmd = [
        "java", "-Xmx512m", "-cp", f"{dist.root}/{sub}/*",
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic", spec.topic.name, "--num-records", str(records),
        "--record-size", str(p.message_bytes), "--throughput", "-1",
        "--producer-props", *props,
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    final = [m for m in PERF_LINE.finditer(out.stdout)]
    if out.returncode != 0 or not final:
        raise SystemExit(f"ProducerPerformance failed ({out.returncode}): {out.stderr[-2000:]}")
    last = final[-1]
    records_sent = int(last.group(1))
    return {
        "records": records_sent,
        "rate": float(last.group(2)),
        "cpu_us_per_msg": cpu / max(1, records_sent) * 1e6,  # includes JVM start-up
    }


def on_fresh_topic(
    spec: TestSpec, bootstrap: str, topic: str, measure: Callable[[], dict[str, float]]
) -> dict[str, float]:
    """Run one measurement on a new topic (``spec.topic.name``), deleting it afterwards."""
    spec.topic.name = topic
    admin.create_topic(bootstrap, spec.topic, timeout_s=60)
    try:
        return measure()
    finally:
        admin.delete_topic(bootstrap, spec.topic.name, timeout_s=30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", default="c1", help="cluster name (default c1)")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--workers", type=int, default=1, help="producer workers (threads)")
    ap.add_argument("--acks", default="all")
    ap.add_argument("--no-idempotence", action="store_true")
    ap.add_argument("--message-bytes", type=int, default=100)
    ap.add_argument("--perf-records", type=int, default=1_000_000)
    ap.add_argument("--reuse", action="store_true", help="use an existing cluster, keep it")
    ap.add_argument("--client", choices=("librdkafka", "java", "both"), default="both")
    ap.add_argument(
        "--perf-prop",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra ProducerPerformance producer property, e.g. batch.size=1000000 (repeatable)",
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    existed = (cluster_dir(args.name) / "cluster.json").exists()
    if existed and not args.reuse:
        raise SystemExit(f"cluster {args.name} exists; pass --reuse or bring it down first")
    if not existed:
        t0 = time.monotonic()
        cli("cluster", "up", "--name", args.name, "--kafka-version", NEWEST_KAFKA, timeout=600)
        print(f"cluster up: {time.monotonic() - t0:.1f}s")
    try:
        cluster = Cluster.load(args.name)
        bootstrap = cluster.bootstrap_servers()
        spec = TestSpec(name="bench-throughput", seed=1)
        spec.cluster.kafka_version = cluster.kafka_version
        spec.producer.rate = 0.0  # unpaced
        spec.producer.workers = args.workers
        spec.producer.acks = args.acks
        spec.producer.enable_idempotence = not args.no_idempotence
        spec.producer.message_bytes = args.message_bytes
        spec.consumer.groups = 0
        stamp = int(time.time())

        # ProducerPerformance runs before and after the workload, so a change
        # in the (shared, busy) machine's load shows up as a spread.
        def perf() -> dict[str, float]:
            return perf_rate(spec, bootstrap, args.perf_records, 600, args.perf_prop)

        perfs = [on_fresh_topic(spec, bootstrap, f"bench-perf1-{stamp}", perf)]
        load_before = os.getloadavg()[0]
        clients = ("librdkafka", "java") if args.client == "both" else (args.client,)
        wls = {}
        for client in clients:
            spec.producer.client = client
            wls[client] = on_fresh_topic(
                spec, bootstrap, f"bench-wl-{client}-{stamp}",
                lambda: workload_rate(spec, bootstrap, args.seconds),
            )  # fmt: skip
        load_after = os.getloadavg()[0]
        perfs.append(on_fresh_topic(spec, bootstrap, f"bench-perf2-{stamp}", perf))
    finally:
        if not existed:
            cli("cluster", "down", "--name", args.name, timeout=300)

    perf_mean = sum(p["rate"] for p in perfs) / len(perfs)
    idem = "on" if spec.producer.enable_idempotence else "off"
    print(
        f"settings: acks={args.acks} idempotence={idem} message_bytes={args.message_bytes} "
        f"linger.ms={spec.producer.linger_ms} max.in.flight={spec.producer.max_in_flight} "
        f"workers={args.workers} kafka={spec.cluster.kafka_version}"
    )
    print(f"client defaults that differ: {DEFAULTS_DIFFER}")
    if args.perf_prop:
        print(f"ProducerPerformance extra properties: {' '.join(args.perf_prop)}")
    for client, wl in wls.items():
        print(
            f"queue workload on {client} (history recorded): {wl['acked_rate']:.0f} acked "
            f"msg/s over {args.seconds - WARMUP_S:.0f}s steady state "
            f"({wl['acked']} ok, {wl['failed']} fail, {wl['indeterminate']} info, "
            f"{wl['history_lines']} history lines)"
        )
    runs = ", ".join(f"{p['rate']:.0f}" for p in perfs)
    print(
        f"ProducerPerformance: {perf_mean:.0f} msg/s mean of before/after runs ({runs}; "
        f"{perfs[0]['records']} records each)"
    )
    perf_cpu = sum(p["cpu_us_per_msg"] for p in perfs) / len(perfs)
    cpus = ", ".join(f"{c} {wl['cpu_us_per_msg']:.1f} us" for c, wl in wls.items())
    print(
        f"client CPU per acked message (load-independent): workload {cpus} (client + "
        f"recording), ProducerPerformance {perf_cpu:.1f} us (JVM incl. start-up)"
    )
    print(f"1-min load average around the workload runs: {load_before:.1f} -> {load_after:.1f}")
    for client, wl in wls.items():
        ratio = wl["acked_rate"] / perf_mean if perf_mean else float("nan")
        print(f"ratio workload on {client}/ProducerPerformance: {ratio:.2f} (target >= 0.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
