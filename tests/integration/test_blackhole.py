"""The blackhole fault on a real cluster: a request sent during it arrives after it.

A produce to the blackholed leader gets no answer; the producer gives up on
it (a timeout, retries off) and the fault heals later.  The record is then
in the log anyway, appended by the broker after the heal: the topic stamps
records with the broker's clock (LogAppendTime), so the record's own
timestamp says when the request really arrived.  Other brokers, and the
harness's SSH, were reachable throughout.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka_chaos.harness import admin
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.spec import TopicSpec
from kafka_chaos.nemeses import registry
from kafka_chaos.nemeses.base import FaultOp
from kafka_chaos.nemeses.targeting import leader_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

FAULT_S = 8.0  # longer than the producer's request and delivery timeouts below


def test_a_produce_sent_into_the_blackhole_is_appended_after_the_heal(
    kafka_cluster: Cluster,
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers()
    topic = TopicSpec(
        name=f"blackhole-{uuid.uuid4().hex[:8]}",
        partitions=1,
        min_insync_replicas=1,
        config={"message.timestamp.type": "LogAppendTime"},
    )
    admin.create_topic(bootstrap, topic)
    leader = kafka_cluster.node(leader_of(kafka_cluster, topic.name, 0)["node"])
    reports: dict[str, str | None] = {}

    def delivered(err, msg) -> None:
        reports[msg.value().decode()] = None if err is None else err.name()

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
        "retries": 0, "request.timeout.ms": 2000, "message.timeout.ms": 3000,
        "linger.ms": 0, "log_level": 0,
    })  # fmt: skip
    producer.produce(topic.name, b"before", partition=0, on_delivery=delivered)
    producer.flush(10)
    assert reports == {"before": None}, "the leader took a write before the fault"

    kind = registry.kind("blackhole")
    op = FaultOp(id=0, f="blackhole", at_s=0.0, duration_s=FAULT_S, targets=[leader.name])
    kind.apply(kafka_cluster, op, [leader], topic.name)
    try:
        sent = time.time()
        producer.produce(topic.name, b"late", partition=0, on_delivery=delivered)
        producer.flush(FAULT_S - 1)
        assert reports.get("late") is not None, f"the producer heard back: {reports}"
        assert leader.run("echo reachable", timeout=10).stdout.strip() == "reachable"
        time.sleep(max(0.0, sent + FAULT_S - time.time()))
    finally:
        healing = time.time()  # until now the rule was in place
        kind.heal(kafka_cluster, op, [leader])

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"{topic.name}-check",
        "enable.auto.commit": False, "log_level": 0,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic.name, 0, 0)])
    seen: dict[str, float] = {}
    deadline = time.monotonic() + 60  # the kernel retransmits with backoff after the heal
    try:
        while "late" not in seen and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen[msg.value().decode()] = msg.timestamp()[1] / 1000
    finally:
        consumer.close()
        admin.delete_topic(bootstrap, topic.name)
    assert "late" in seen, f"the abandoned produce never arrived (saw {sorted(seen)})"
    # Sent during the fault, given up on (reports["late"]), appended only after the heal
    # began: the broker's append time is at least FAULT_S after the send.
    assert seen["late"] >= healing >= sent + FAULT_S - 0.1, (sent, healing, seen)
