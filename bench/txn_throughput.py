"""Transactional throughput with full recording, vs Kafka's own TransactionalMessageCopier.

Both copy the same input records, consume-transform-produce, with the
consumed offsets committed inside each transaction, on the same cluster:

1. the input topic is filled with ``--records`` records by the queue
   workload's producers (integers, as the txn workload's inputs are);
2. the txn workload in ``ctp`` mode (``--processes`` transactional
   processes, unpaced, no client aborts, every transaction recorded in the
   history) copies them to ``<topic>-out`` until its output has them all;
3. Kafka's ``org.apache.kafka.tools.TransactionalMessageCopier``
   (``--processes`` instances in group mode, a fresh group and output
   topic) copies the same input, with ``--transaction-size`` set to the
   mean transaction size the workload reached, so both commit as often.

Prints both rates in copied records/s and committed transactions/s and the
ratio workload/copier.  Prints figures; asserts nothing.

    python bench/txn_throughput.py [--name txbench] [--records 50000] [--processes 1] [--reuse]
        [--client librdkafka|java|both]

With ``--client both`` (the default) the workload copies twice, once per
client, each over its own freshly filled input topic; the copier runs once,
with the librdkafka run's mean transaction size.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafka_chaos.harness import admin
from kafka_chaos.harness.cluster import Cluster, cluster_dir
from kafka_chaos.harness.distribution import load_cached
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.spec import NEWEST_KAFKA, TestSpec
from kafka_chaos.workloads import txn_spec
from kafka_chaos.workloads.queue import QueueWorkload
from kafka_chaos.workloads.txn import TxnWorkload
from kafka_chaos.workloads.txn_client import output_topic

FILL_RATE = 20_000.0  # input records/s while filling (the queue workload, paced)


def cli(*args: str, timeout: float) -> None:
    subprocess.run(["kafka-chaos", *args], check=True, timeout=timeout)


def fill(spec: TestSpec, bootstrap: str, records: int) -> int:
    """Write about ``records`` integer records to the input topic; returns how many were acked."""
    fill_spec = TestSpec.from_dict(spec.to_dict())
    fill_spec.workload = "queue"
    fill_spec.producer.rate = FILL_RATE
    fill_spec.consumer.groups = 0
    with tempfile.TemporaryDirectory(prefix="bench-txn-fill-") as tmp:
        with HistoryWriter(Path(tmp) / "history.jsonl") as history:
            workload = QueueWorkload(fill_spec, bootstrap, history, Path(tmp), live=False)
            workload.start()
            time.sleep(records / FILL_RATE)
            return workload.stop().sends_ok


def workload_copy(spec: TestSpec, bootstrap: str, inputs: int, timeout_s: float) -> dict:
    """The ctp workload over the filled input: until every input is copied (or timeout)."""
    with tempfile.TemporaryDirectory(prefix="bench-txn-wl-") as tmp:
        run = Path(tmp)
        cpu0 = time.process_time()
        with HistoryWriter(run / "history.jsonl") as history:
            workload = TxnWorkload(spec, bootstrap, history, run, live=False)
            workload.start()
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and workload.summary().sends_committed < inputs:
                time.sleep(0.2)
            summary = workload.stop()
        cpu = time.process_time() - cpu0
        commits = []  # (time s, records copied) of committed transactions
        with open(run / "history.jsonl", encoding="utf-8") as fh:
            for line in fh:
                if '"f":"txn"' in line and '"type":"ok"' in line:
                    op = json.loads(line)
                    sends = sum(1 for m in op["value"]["ops"] if m["f"] == "send")
                    commits.append((op["time"] / 1e9, sends))
    first, last = commits[0][0], commits[-1][0]
    copied = sum(n for _, n in commits)
    return {
        "copied": copied,
        "txns": len(commits),
        "seconds": last - first,
        "records_per_s": copied / max(1e-9, last - first),
        "txns_per_s": len(commits) / max(1e-9, last - first),
        "mean_txn": copied / max(1, len(commits)),
        "aborted": summary.txns_fail,
        "unknown": summary.txns_info,
        "cpu_us_per_record": cpu / max(1, copied) * 1e6,
    }


def copier(spec: TestSpec, bootstrap: str, size: int, processes: int, timeout_s: float) -> dict:
    """``processes`` TransactionalMessageCopier instances in group mode over the input topic.

    Time runs from the first status line any instance prints (its JVM is up
    and it has its assignment) to the last instance's exit."""
    dist = load_cached(spec.cluster.kafka_version)
    if dist is None:
        raise SystemExit(f"Kafka {spec.cluster.kafka_version} is not cached; run dist fetch")
    sub = "tools" if dist.tools_version else "libs"
    out_topic = f"{spec.topic.name}-copier"
    admin.create_topic(bootstrap, _named(spec, out_topic).topic, timeout_s=60)
    group = f"{spec.topic.name}-copier-group"
    procs = []
    for i in range(processes):
        cmd = [
            "java", "-Xmx512m", "-cp", f"{dist.root}/{sub}/*:{dist.root}/libs/*",
            "org.apache.kafka.tools.TransactionalMessageCopier",
            "--broker-list", bootstrap, "--input-topic", spec.topic.name,
            "--input-partition", "0", "--output-topic", out_topic,
            "--consumer-group", group, "--group-mode", "--use-group-metadata",
            "--transaction-size", str(size), "--transactional-id", f"{group}-{i}",
        ]  # fmt: skip
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    first_status = None
    processed = [0] * len(procs)  # each instance's last totalProcessed
    deadline = time.monotonic() + timeout_s
    for i, proc in enumerate(procs):
        assert proc.stdout is not None
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            first_status = first_status or time.monotonic()
            processed[i] = max(processed[i], int(json.loads(line).get("totalProcessed", 0)))
            if time.monotonic() > deadline:
                proc.kill()
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    seconds = time.monotonic() - (first_status or time.monotonic())
    copied = sum(processed)
    return {
        "copied": copied,
        "seconds": seconds,
        "records_per_s": copied / max(1e-9, seconds),
        "txns_per_s": copied / size / max(1e-9, seconds),
        "exit_codes": [p.returncode for p in procs],
    }


def _named(spec: TestSpec, topic: str) -> TestSpec:
    other = TestSpec.from_dict(spec.to_dict())
    other.topic.name = topic
    return other


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", default="txbench", help="cluster name")
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--reuse", action="store_true", help="use an existing cluster, keep it")
    ap.add_argument(
        "--client", default="both", choices=("librdkafka", "java", "both"),
        help="whose client the txn workload runs on (both: one after the other)",
    )  # fmt: skip
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    existed = (cluster_dir(args.name) / "cluster.json").exists()
    if existed and not args.reuse:
        raise SystemExit(f"cluster {args.name} exists; pass --reuse or bring it down first")
    if not existed:
        cli("cluster", "up", "--name", args.name, "--kafka-version", NEWEST_KAFKA, timeout=600)
    clients = ["librdkafka", "java"] if args.client == "both" else [args.client]
    copies: dict[str, dict] = {}
    try:
        cluster = Cluster.load(args.name)
        bootstrap = cluster.bootstrap_servers()
        base = f"bench-txn-{int(time.time())}"
        load0 = os.getloadavg()[0]
        for client in clients:  # each on its own input topic and group, filled alike
            spec = _spec(cluster.kafka_version, f"{base}-{client}", args.processes, client)
            admin.create_topic(bootstrap, spec.topic, timeout_s=60)
            inputs = fill(spec, bootstrap, args.records)
            copies[client] = workload_copy(spec, bootstrap, inputs, args.timeout)
        size = max(1, round(copies[clients[0]]["mean_txn"]))
        tmc = copier(spec, bootstrap, size, args.processes, args.timeout)
        load1 = os.getloadavg()[0]
        for client in clients:
            topic = f"{base}-{client}"
            for name in (topic, output_topic(topic)):
                admin.delete_topic(bootstrap, name, timeout_s=30)
        admin.delete_topic(bootstrap, f"{spec.topic.name}-copier", timeout_s=30)
    finally:
        if not existed:
            cli("cluster", "down", "--name", args.name, timeout=300)
    print(
        f"settings: kafka={spec.cluster.kafka_version} processes={args.processes} "
        f"partitions={spec.topic.partitions} inputs={inputs} (filled at {FILL_RATE:.0f}/s)"
    )
    for client, wl in copies.items():
        print(
            f"txn workload on {client} (ctp, history recorded): {wl['copied']} copied in "
            f"{wl['txns']} committed txns over {wl['seconds']:.1f}s: "
            f"{wl['records_per_s']:.0f} records/s, {wl['txns_per_s']:.1f} txns/s, mean "
            f"{wl['mean_txn']:.1f} records/txn ({wl['aborted']} aborted, {wl['unknown']} "
            f"unknown; client CPU {wl['cpu_us_per_record']:.0f} us/record)"
        )
    print(
        f"TransactionalMessageCopier (--transaction-size {size}): {tmc['copied']} copied in "
        f"{tmc['seconds']:.1f}s: {tmc['records_per_s']:.0f} records/s, "
        f"~{tmc['txns_per_s']:.1f} txns/s (exit codes {tmc['exit_codes']})"
    )
    print(f"1-min load average: {load0:.1f} -> {load1:.1f}")
    for client, wl in copies.items():
        ratio = wl["records_per_s"] / tmc["records_per_s"] if tmc["records_per_s"] else float("nan")
        print(f"ratio workload on {client}/copier (records/s): {ratio:.2f}")
    return 0


def _spec(version: str, topic: str, processes: int, client: str) -> TestSpec:
    """The ctp workload, unpaced, no client aborts, on ``client``, over ``topic``."""
    spec = TestSpec(name="bench-txn-throughput", seed=1, workload="txn")
    spec.cluster.kafka_version = version
    spec.topic.name = topic
    txn_spec.of(spec).mode = "ctp"
    txn_spec.of(spec).processes = processes
    txn_spec.of(spec).rate = 0.0  # unpaced
    txn_spec.of(spec).abort_probability = 0.0
    spec.producer.rate = 1.0  # the workload's own input producers only trickle
    spec.producer.workers = 1
    spec.producer.client = spec.consumer.client = client
    return spec


if __name__ == "__main__":
    sys.exit(main())
