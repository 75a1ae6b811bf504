"""Which node a leader- or controller-targeted fault hits (or which nodes an
ISR-targeted one hits), decided when it starts.

Leadership moves during a run, so the target is looked up at the moment the
fault begins and the answer (node, partition, how it was found) goes into
the history and the realised schedule; a replay then hits that recorded node
instead of asking again.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka_chaos.harness import kafka_names
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.kafka_clients import close_quietly
from kafka_chaos.nemeses.base import NemesisError

log = logging.getLogger(__name__)

ADMIN_TIMEOUT_S = 10.0


def resolve(
    cluster: Cluster,
    mode: str,
    params: dict[str, Any],
    topic: str | None,
    group: str | None = None,
) -> dict[str, Any]:
    """``{"node": name, ...how}`` for a target mode other than ``random``
    (``isr`` adds ``"nodes"``: every node it hits).

    ``group`` is the run's first consumer or share group; ``params.group``
    names another.
    """
    if mode == "leader":
        return leader_of(cluster, params.get("topic") or topic, params.get("partition"))
    if mode == "isr":
        return isr_of(cluster, params.get("topic") or topic, params.get("partition"))
    if mode == "controller":
        return active_controller(cluster)
    if mode == "coordinator":
        return txn_coordinator(cluster, params.get("transactional_id"), topic)
    if mode == "group-coordinator":
        return group_coordinator(cluster, params.get("group") or group)
    if mode == "share-coordinator":
        return share_coordinator(
            cluster, params.get("group") or group, params.get("topic") or topic,
            params.get("partition"),
        )  # fmt: skip
    raise NemesisError(f"cannot resolve a target for mode {mode!r}")


def leader_of(cluster: Cluster, topic: str | None, partition: int | None) -> dict[str, Any]:
    """The leader of ``topic``/``partition``, or of the topic's busiest partition."""
    found = partition_now(cluster, topic, partition, "leader")
    if found["leader_id"] is None or found["leader_id"] < 0:
        raise NemesisError(
            f"leader targeting: {topic}-{found['partition']} has no leader right now"
        )
    return {"node": cluster.node(found["leader_id"]).name, **found}


def isr_of(cluster: Cluster, topic: str | None, partition: int | None) -> dict[str, Any]:
    """The in-sync replicas of ``topic``/``partition``, or of the busiest partition.

    Why the ISR: acks=all waits for exactly these replicas, so a cut of all
    of them is the smallest correlated failure that can take an
    acknowledged write, whatever the replication factor.
    """
    return isr_target(cluster, partition_now(cluster, topic, partition, "isr"))


def isr_target(cluster: Cluster, found: dict[str, Any]) -> dict[str, Any]:
    """``found`` (from ``partition_now``) with the ISR's nodes as the targets."""
    where = f"{found['topic']}-{found['partition']}"
    if not found["isr"]:
        raise NemesisError(f"isr targeting: {where} has an empty ISR now")
    try:
        nodes = sorted(cluster.node(b).name for b in found["isr"])
    except HarnessError as e:
        raise NemesisError(f"isr targeting: {where}: {e}") from e
    return {"node": nodes[0], "nodes": nodes, **found}


def partition_now(
    cluster: Cluster, topic: str | None, partition: int | None, mode: str
) -> dict[str, Any]:
    """Leader and ISR of ``topic``/``partition`` (default: the busiest), and how it was chosen."""
    from kafka_chaos.harness import admin

    if not topic:
        raise NemesisError(f"{mode} targeting needs a topic (params.topic or the run's topic)")
    bootstrap = cluster.bootstrap_servers()
    states = [
        p
        for p in admin.describe_topics(bootstrap, [topic], timeout_s=ADMIN_TIMEOUT_S)
        if p.topic == topic
    ]
    if not states:
        raise NemesisError(f"{mode} targeting: topic {topic!r} has no partitions")
    how = "given"
    if partition is None:
        partition, how = busiest_partition(bootstrap, topic, [p.partition for p in states])
    chosen = next((p for p in states if p.partition == partition), None)
    if chosen is None:
        raise NemesisError(f"{mode} targeting: {topic!r} has no partition {partition}")
    return {
        "topic": topic,
        "partition": partition,
        "partition_choice": how,
        "leader_id": chosen.leader,
        "isr": list(chosen.isr),
    }


def busiest_partition(bootstrap: str, topic: str, partitions: list[int]) -> tuple[int, str]:
    """The partition with the highest high watermark (most writes so far)."""
    from confluent_kafka import Consumer, TopicPartition

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
    from kafka_chaos.harness import kafka_db

    cid = kafka_db.controller_id(cluster, timeout_s=ADMIN_TIMEOUT_S)
    if cid is None:
        raise NemesisError("controller targeting: the cluster reports no active controller")
    return {"node": cluster.node(cid).name, "controller_id": cid, "mode": cluster.mode}


TXN_STATE = "__transaction_state"
OFFSETS = "__consumer_offsets"
SHARE_STATE = "__share_group_state"


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
    if not transactional_id:
        if not topic:
            raise NemesisError("coordinator targeting needs a transactional_id or the run's topic")
        transactional_id = kafka_names.transactional_id(topic, 0)
    found = _leader_of_internal(cluster, TXN_STATE, transactional_id, "coordinator")
    return {"transactional_id": transactional_id, **found}


def _leader_of_internal(cluster: Cluster, topic: str, key: str, what: str) -> dict[str, Any]:
    """The leader of the partition of internal ``topic`` that ``key`` hashes to.

    Kafka's coordinators all place a key the same way:
    ``Utils.abs(key.hashCode()) % partitions`` (GroupCoordinatorService and
    ShareCoordinatorService.partitionFor in 4.4.0), and the coordinator is
    that partition's leader.
    """
    from kafka_chaos.harness import admin

    states = admin.describe_topics(cluster.bootstrap_servers(), [topic], timeout_s=ADMIN_TIMEOUT_S)
    states = [p for p in states if p.topic == topic]
    if not states:
        raise NemesisError(f"{what} targeting: {topic} does not exist yet")
    partition = coordinator_partition(key, len(states))
    chosen = next(p for p in states if p.partition == partition)
    if chosen.leader is None or chosen.leader < 0:
        raise NemesisError(f"{what} targeting: {topic}-{partition} has no leader now")
    return {
        "node": cluster.node(chosen.leader).name,
        "key": key,
        "state_topic": topic,
        "state_partition": partition,
        "leader_id": chosen.leader,
    }


def group_coordinator(cluster: Cluster, group: str | None) -> dict[str, Any]:
    """The broker coordinating ``group``: its membership, and its offset commits."""
    if not group:
        raise NemesisError("group-coordinator targeting needs a group (params.group)")
    return {"group": group, **_leader_of_internal(cluster, OFFSETS, group, "group-coordinator")}


def share_coordinator(
    cluster: Cluster, group: str | None, topic: str | None, partition: int | None
) -> dict[str, Any]:
    """The broker keeping ``group``'s share state for ``topic``/``partition`` (default 0).

    Share state is placed per share-partition, by the key
    ``group:topicId:partition`` (SharePartitionKey.asCoordinatorKey), so each
    partition of one group may have its state on another broker.
    """
    from kafka_chaos.harness import admin

    if not group or not topic:
        raise NemesisError("share-coordinator targeting needs a share group and a topic")
    partition = 0 if partition is None else int(partition)
    tid = admin.topic_id(cluster.bootstrap_servers(), topic, timeout_s=ADMIN_TIMEOUT_S)
    key = share_partition_key(group, tid, partition)
    found = _leader_of_internal(cluster, SHARE_STATE, key, "share-coordinator")
    return {"group": group, "topic": topic, "partition": partition, **found}


def share_partition_key(group: str, topic_id: str, partition: int) -> str:
    """Kafka's key for a share-partition's state: ``%s:%s:%d`` of group, topic id, partition."""
    return f"{group}:{topic_id}:{partition}"
