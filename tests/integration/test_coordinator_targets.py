"""The group- and share-coordinator targets name the brokers Kafka itself uses.

A group's coordinator is what Kafka's describe-groups answers; a share
group's state for one partition is written to the ``__share_group_state``
partition whose leader the target names (the only way to see the share
coordinator from outside: no Admin call reports it).
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka_chaos.harness import admin
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.spec import TopicSpec
from kafka_chaos.nemeses.targeting import SHARE_STATE, group_coordinator, share_coordinator

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _topic(cluster: Cluster, records: int) -> str:
    name = f"targets-{uuid.uuid4().hex[:8]}"
    admin.create_topic(cluster.bootstrap_servers(), TopicSpec(name=name, partitions=1))
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "log_level": 0})
    for i in range(records):
        producer.produce(name, str(i).encode(), partition=0)
    assert producer.flush(30) == 0
    return name


def test_the_group_coordinator_target_is_the_groups_coordinator(kafka_cluster: Cluster) -> None:
    bootstrap = kafka_cluster.bootstrap_servers()
    topic = _topic(kafka_cluster, 10)
    group = f"{topic}-g0"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "log_level": 0})  # fmt: skip
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.5)
        assert consumer.assignment(), "the consumer never joined its group"
        client = AdminClient({"bootstrap.servers": bootstrap})  # kept until its answer
        described = client.describe_consumer_groups([group], request_timeout=20)
        coordinator = described[group].result(timeout=30).coordinator.id
    finally:
        consumer.close()
    resolved = group_coordinator(kafka_cluster, group)
    assert resolved["leader_id"] == coordinator, resolved
    assert resolved["node"] == kafka_cluster.node(coordinator).name


def test_the_share_coordinator_target_holds_the_share_partitions_state(
    kafka_cluster: Cluster,
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers()
    topic = _topic(kafka_cluster, 10)
    group = f"{topic}-s0"
    admin.set_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    before = _state_ends(bootstrap)
    settings = {"bootstrap.servers": bootstrap, "group.id": group,
                "share.acknowledgement.mode": "explicit", "log_level": 0}  # fmt: skip
    consumer = ShareConsumer(settings)
    acked = 0
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while acked < 10 and time.monotonic() < deadline:
            for msg in consumer.poll(1.0) or []:
                if msg.error() is None:
                    consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
                    acked += 1
            consumer.commit_sync(10.0)
    finally:
        consumer.close()
    assert acked == 10, f"the share group delivered {acked} of 10 records"
    resolved = share_coordinator(kafka_cluster, group, topic, 0)
    grown = {p for p, end in _state_ends(bootstrap).items() if end > before.get(p, 0)}
    assert resolved["state_partition"] in grown, (resolved, grown)


def _state_ends(bootstrap: str) -> dict[int, int]:
    """Each ``__share_group_state`` partition's end offset (none before the first share group)."""
    try:
        states = admin.describe_topics(bootstrap, [SHARE_STATE])
    except admin.AdminError:
        return {}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "targets-probe",
                         "log_level": 0})  # fmt: skip
    try:
        return {
            s.partition: consumer.get_watermark_offsets(
                TopicPartition(SHARE_STATE, s.partition), timeout=10
            )[1]
            for s in states
        }
    finally:
        consumer.close()
