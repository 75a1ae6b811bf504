"""The share-stall probe's child on a real 4.4 cluster (workloads/java/share_probe.py).

Why: the probe runs only when a run stalls, which no short test can make happen
on purpose, so its Kafka calls are tested here directly: a group with records,
one probe, and what it must leave behind (one batch taken and RELEASEd, every
step a history line the share checks read, the Admin view of the group).
About 30 s, most of it the child's JVM start and a new member's first
assignment.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer
from kafka_chaos.harness import admin
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.history import HistoryWriter, read_history
from kafka_chaos.harness.spec import TestSpec, TopicSpec
from kafka_chaos.workloads.java.share_probe import ProbeProcess
from kafka_chaos.workloads.share_consumer import group_settings

from testkit.share_events import share_events

pytestmark = pytest.mark.integration


def test_a_probe_takes_one_batch_releases_it_and_records_every_step(
    kafka_cluster: Cluster, tmp_path
):
    bootstrap = kafka_cluster.bootstrap_servers()
    topic = f"share-probe-{int(time.time())}"
    admin.create_topic(bootstrap, TopicSpec(name=topic, partitions=3, replication_factor=3), 30)
    group = f"{topic}-s0"
    admin.set_group_config(bootstrap, group, group_settings(TestSpec()))
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        producer.produce(topic, value=json.dumps(i).encode(), key=b"k", partition=i % 3)
    assert producer.flush(30) == 0
    child = ProbeProcess(kafka_cluster.kafka_version, tmp_path / "share-probes", bootstrap)
    try:
        with HistoryWriter(tmp_path / "history.jsonl") as history:
            child.start()
            got = child.run(history, 7, {
                "group": group, "topic": topic, "partitions": 3, "client_id": "it-probe1",
                "lock_ms": 15000, "delivery_limit": 5,
            }, again=False)  # fmt: skip
    finally:
        child.stop()
        admin.delete_topic(bootstrap, topic, timeout_s=30)

    assert got["error"] is None, got
    assert sorted(got["admin"]["leaders"]) == ["0", "1", "2"]  # JSON keys, through the pipe
    joined = got["admin_joined"]["group"]["members"]
    assert [m["client_id"] for m in joined] == ["it-probe1"]
    batches = [m["records"] for m in got["member"] if m["records"]]
    assert len(batches) == 1, got["member"]  # one batch only: no re-acquiring its own releases
    assert {r["delivery_count"] for r in batches[0]} == {1}

    ops = list(read_history(tmp_path / "history.jsonl"))
    assert {op["process"] for op in ops} == {7}
    assert [op["f"] for op in ops if op["type"] != "invoke"][-2:] == ["share-ack", "share-close"]
    ev = share_events(ops)
    assert len(ev.deliveries) == len(batches[0])
    assert {(a.type, a.outcome) for a in ev.acks} == {("release", "committed")}
    assert {a.record for a in ev.acks} == {d.record for d in ev.deliveries}
