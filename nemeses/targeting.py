"""Which node a leader- or controller-targeted fault hits, decided when it starts.

Leadership moves during a run, so the target is looked up at the moment the
fault begins and the answer (node, partition, how it was found) goes into
the history and the realised schedule; a replay then hits that recorded node
instead of asking again.
"""

from __future__ import annotations

import logging
from typing import Any

from harness.cluster import Cluster
from nemeses.base import NemesisError

log = logging.getLogger(__name__)

ADMIN_TIMEOUT_S = 10.0


def resolve(
    cluster: Cluster, mode: str, params: dict[str, Any], topic: str | None
) -> dict[str, Any]:
    """``{"node": name, ...how}`` for mode ``leader``, ``controller`` or ``coordinator``."""
    if mode == "leader":
        return leader_of(cluster, params.get("topic") or topic, params.get("partition"))
    if mode == "controller":
        return active_controller(cluster)
    if mode == "coordinator":
        return txn_coordinator(cluster, params.get("transactional_id"), topic)
    raise NemesisError(f"cannot resolve a target for mode {mode!r}")


def leader_of(cluster: Cluster, topic: str | None, partition: int | None) -> dict[str, Any]:
    """The leader of ``topic``/``partition``, or of the topic's busiest partition."""
    from harness import admin

    if not topic:
        raise NemesisError("leader targeting needs a topic (params.topic or the run's topic)")
    bootstrap = cluster.bootstrap_servers()
    states = [
        p
        for p in admin.describe_topics(bootstrap, [topic], timeout_s=ADMIN_TIMEOUT_S)
        if p.topic == topic
    ]
    if not states:
        raise NemesisError(f"leader targeting: topic {topic!r} has no partitions")
    how = "given"
    if partition is None:
        partition, how = busiest_partition(bootstrap, topic, [p.partition for p in states])
    chosen = next((p for p in states if p.partition == partition), None)
    if chosen is None:
        raise NemesisError(f"leader targeting: {topic!r} has no partition {partition}")
    if chosen.leader is None or chosen.leader < 0:
        raise NemesisError(f"leader targeting: {topic}-{partition} has no leader right now")
    node = cluster.node(chosen.leader)
    return {
        "node": node.name,
        "topic": topic,
        "partition": partition,
        "partition_choice": how,
        "leader_id": chosen.leader,
        "isr": list(chosen.isr),
    }


def busiest_partition(bootstrap: str, topic: str, partitions: list[int]) -> tuple[int, str]:
    """The partition with the highest high watermark (most writes so far)."""
    from confluent_kafka import Consumer, TopicPartition

    from workloads.consumer import close_quietly

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kafka-chaos-nemesis-targeting",
            "enable.auto.commit": False,
            "socket.timeout.ms": int(ADMIN_TIMEOUT_S * 1000),
            "log_level": 0,  # a killed or paused broker is the point, not news
        }
    )
    try:
        best, best_high = partitions[0], -1
        for p in sorted(partitions):
            try:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=ADMIN_TIMEOUT_S / len(partitions) + 1
                )
            except Exception as e:  # a partition without a leader has no watermark now
                log.debug("watermark of %s-%s: %s", topic, p, e)
                continue
            if high > best_high:
                best, best_high = p, high
        return best, f"busiest (high watermark {best_high})"
    finally:
        close_quietly(consumer, "close the targeting consumer")


def active_controller(cluster: Cluster) -> dict[str, Any]:
    """The node that is the active controller right now (ZK controller or KRaft
    quorum leader, as ``kafka_db.controller_id`` finds it)."""
    from harness import kafka_db

    cid = kafka_db.controller_id(cluster, timeout_s=ADMIN_TIMEOUT_S)
    if cid is None:
        raise NemesisError("controller targeting: the cluster reports no active controller")
    return {"node": cluster.node(cid).name, "controller_id": cid, "mode": cluster.mode}


TXN_STATE = "__transaction_state"


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units), as Kafka hashes a transactional.id."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def coordinator_partition(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition that owns ``transactional_id``.

    Kafka: ``Utils.abs(id.hashCode) % partitionCount``, where ``Utils.abs``
    maps Integer.MIN_VALUE to 0.
    """
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def txn_coordinator(
    cluster: Cluster, transactional_id: str | None, topic: str | None
) -> dict[str, Any]:
    """The broker coordinating ``transactional_id`` (default: the run's first process).

    The coordinator is the leader of the transaction log partition the id
    hashes to, so this asks for that leader rather than for the
    transaction's state (no Admin call for that exists in confluent-kafka).
    """
    from harness import admin
    from workloads.txn_client import transactional_id as txn_id

    if not transactional_id:
        if not topic:
            raise NemesisError("coordinator targeting needs a transactional_id or the run's topic")
        transactional_id = txn_id(topic, 0)
    states = admin.describe_topics(
        cluster.bootstrap_servers(), [TXN_STATE], timeout_s=ADMIN_TIMEOUT_S
    )
    states = [p for p in states if p.topic == TXN_STATE]
    if not states:
        raise NemesisError(f"coordinator targeting: {TXN_STATE} does not exist yet")
    partition = coordinator_partition(transactional_id, len(states))
    chosen = next(p for p in states if p.partition == partition)
    if chosen.leader is None or chosen.leader < 0:
        raise NemesisError(f"coordinator targeting: {TXN_STATE}-{partition} has no leader now")
    return {
        "node": cluster.node(chosen.leader).name,
        "transactional_id": transactional_id,
        "txn_log_partition": partition,
        "leader_id": chosen.leader,
    }
