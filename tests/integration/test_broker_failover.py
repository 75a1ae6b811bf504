"""Broker failover, the seed lab: kill a partition leader, watch Kafka heal.

On a real 3-node cluster: create an RF=3 topic, produce and consume through
it, SIGKILL the leader of partition 0 (via its pid file), and check that
leadership moves to another replica and the ISR shrinks without it; restart
the broker and check that it rejoins the ISR.  Once on the shared KRaft
cluster of the newest Kafka, once in ZooKeeper mode on 3.9 (own cluster).
A last test covers the cheap lifecycle and admin verbs other layers build on.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import pytest
from _kafka_clusters import running_cluster
from _waiting import wait_for
from kafka_chaos.forensics import replica_verify
from kafka_chaos.harness import admin, kafka_db
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError, HarnessError
from kafka_chaos.harness.spec import KAFKA_39, ClusterSpec, TopicSpec

pytestmark = pytest.mark.integration

MESSAGES = 300
CLIENT_TIMEOUT_S = 60.0
FAILOVER_TIMEOUT_S = 60.0
REJOIN_TIMEOUT_S = 120.0


def produce(bootstrap: str, topic: str, values: range) -> dict[int, tuple[int, int]]:
    """Send ``values`` with acks=all; returns value -> (partition, offset) of the acks."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": int(CLIENT_TIMEOUT_S * 1000 / 2),
            "log_level": 0,
        }
    )
    acked: dict[int, tuple[int, int]] = {}
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is None:
            acked[int(msg.value())] = (msg.partition(), msg.offset())
        else:
            errors.append(err.str())

    for v in values:
        producer.produce(topic, key=str(v % 7), value=str(v), on_delivery=on_delivery)
        producer.poll(0)
    left = producer.flush(CLIENT_TIMEOUT_S)
    assert left == 0, f"{left} messages still in flight after {CLIENT_TIMEOUT_S}s"
    assert not errors, f"sends failed: {errors[:5]}"
    return acked


def consume_all(bootstrap: str, topic: str, partitions: int, want: set[int]) -> set[int]:
    """Read every partition from the start until ``want`` is seen or time runs out."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"failover-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
            "log_level": 0,
        }
    )
    seen: set[int] = set()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while not want <= seen and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=1.0):
                if msg.error() is None:
                    seen.add(int(msg.value()))
    finally:
        consumer.close()
    return seen


def partition(bootstrap: str, topic: str, p: int) -> admin.PartitionState:
    return next(s for s in admin.describe_topics(bootstrap, [topic]) if s.partition == p)


def check_leader_failover(cluster: Cluster) -> None:
    bootstrap = cluster.bootstrap_servers()
    topic = TopicSpec(name=f"failover-{uuid.uuid4().hex[:8]}", partitions=3, replication_factor=3)
    admin.create_topic(bootstrap, topic, timeout_s=60)
    victim = None
    try:
        kafka_db.wait_healthy(cluster, timeout_s=90, topic=topic.name)
        acked = produce(bootstrap, topic.name, range(MESSAGES))
        assert len(acked) == MESSAGES
        assert consume_all(bootstrap, topic.name, topic.partitions, set(acked)) == set(acked)

        before = partition(bootstrap, topic.name, 0)
        assert before.leader is not None and len(before.isr) == 3
        victim = cluster.node(before.leader)
        assert kafka_db.kill(victim)
        assert not kafka_db.is_running(victim)

        after = wait_for(
            "leader of partition 0 moving off the killed broker and the ISR shrinking",
            lambda: (
                s
                if (s := partition(bootstrap, topic.name, 0)).leader not in (None, victim.node_id)
                and victim.node_id not in s.isr
                else None
            ),
            FAILOVER_TIMEOUT_S,
        )
        assert after.leader in before.replicas
        assert set(after.isr) == set(before.isr) - {victim.node_id}
        # Two replicas of three satisfy min.insync.replicas=2: writes still succeed.
        more = produce(bootstrap, topic.name, range(MESSAGES, MESSAGES + 50))
        assert len(more) == 50

        kafka_db.start(victim)
        wait_for(
            "the restarted broker rejoining the ISR of partition 0",
            lambda: victim.node_id in partition(bootstrap, topic.name, 0).isr,
            REJOIN_TIMEOUT_S,
        )
        everything = set(acked) | set(more)
        got = consume_all(bootstrap, topic.name, topic.partitions, everything)
        assert got == everything
    finally:
        kafka_db.recover_cluster(cluster, timeout_s=REJOIN_TIMEOUT_S)
        admin.delete_topic(bootstrap, topic.name, timeout_s=30)


def test_leader_failover_kraft(kafka_cluster: Cluster) -> None:
    check_leader_failover(kafka_cluster)


def test_leader_failover_zookeeper_mode() -> None:
    spec = ClusterSpec(name="kc-zk", nodes=3, kafka_version=KAFKA_39, mode="zk")
    with running_cluster(spec) as cluster:
        assert all(kafka_db.zookeeper_running(n) for n in cluster.nodes)
        check_leader_failover(cluster)


def test_lifecycle_verbs_on_the_shared_cluster(kafka_cluster: Cluster, tmp_path) -> None:
    """The cheap verbs other layers rely on, without restarting anything."""
    from kafka_chaos.harness.distribution import fetch

    cluster = kafka_cluster
    bootstrap = cluster.bootstrap_servers()
    node = cluster.nodes[0]
    controller = kafka_db.controller_id(cluster)
    assert controller in admin.broker_ids(bootstrap)

    # Installing again uploads nothing: the node's checksum marker matches.
    dist = fetch(cluster.kafka_version)
    t0 = time.monotonic()
    assert kafka_db.install(node, dist) == dist.node_dir()
    assert time.monotonic() - t0 < 10

    with pytest.raises(HarnessError, match="stop kafka before wiping"):
        kafka_db.wipe(node)

    # Starting a running cluster again changes nothing (run.py relies on it).
    pids = [n.run(f"cat {n.path('run', 'kafka.pid')}").stdout for n in cluster.nodes]
    spec = ClusterSpec(name=cluster.name, kafka_version=cluster.kafka_version, mode=cluster.mode)
    kafka_db.start_cluster(cluster, spec, timeout_s=60)
    assert [n.run(f"cat {n.path('run', 'kafka.pid')}").stdout for n in cluster.nodes] == pids

    # A pid file naming someone else's process (here: the next node's broker)
    # must never lead to a signal: the cmdline check refuses it.
    pid_file = node.path("run", "kafka.pid")
    own, other = pids[0].strip(), pids[1].strip()
    try:
        node.run(f"echo {other} > {pid_file}")
        assert not kafka_db.is_running(node)
        assert not kafka_db.kill(node)
        assert kafka_db.is_running(cluster.nodes[1])
    finally:
        node.run(f"echo {own} > {pid_file}")
    assert kafka_db.is_running(node)

    try:
        assert kafka_db.pause(node)
        state = node.run(f"grep ^State: /proc/$(cat {node.path('run', 'kafka.pid')})/status")
        assert "stopped" in state.stdout
        assert kafka_db.is_running(node)  # paused is still running
        assert kafka_db.resume(node)
    finally:
        kafka_db.recover_cluster(cluster)

    files = kafka_db.collect_logs(node, tmp_path)
    names = {p.relative_to(tmp_path).as_posix() for p in files}
    assert {"logs/server.log", "config/server.properties", "config/kafka-start.sh"} <= names
    assert not [n for n in names if "ssh" in n]

    topic = TopicSpec(name=f"shape-{uuid.uuid4().hex[:8]}", partitions=2, replication_factor=3)
    assert len(admin.create_topic(bootstrap, topic, timeout_s=60)) == 2
    try:
        assert len(admin.create_topic(bootstrap, topic, timeout_s=60)) == 2  # same shape: fine
        with pytest.raises(ConfigError, match="exists with 2 partitions"):
            admin.create_topic(bootstrap, replace(topic, partitions=4), timeout_s=60)
        assert set(admin.elect_leaders(bootstrap, [(topic.name, 0)]).values()) <= {
            None,
            "ELECTION_NOT_NEEDED",
        }
        # What the broker holds on disk, read with the Kafka tool on a replica.
        acked = produce(bootstrap, topic.name, range(1000, 1020))
        p0 = sorted(v for v, (p, _) in acked.items() if p == 0)
        assert p0, "no message landed in partition 0"
        segment = node.path("data", "kafka", f"{topic.name}-0", f"{0:020d}.log")
        dump = kafka_db.run_tool(
            cluster,
            node,
            kafka_db.dump_log_segments_class(cluster.kafka_version),
            ["--files", segment, "--print-data-log"],
        ).stdout
        assert f"payload: {p0[0]}" in dump and f"payload: {p0[-1]}" in dump
        # Slow nodes have their segments dumped on the host: the same logs result.
        here = replica_verify.dump_node(cluster, node, topic.name, tmp_path / "a", on_host=True)
        there = replica_verify.dump_node(cluster, node, topic.name, tmp_path / "b", on_host=False)
        assert here.error is None and there.error is None, (here.error, there.error)
        live = node.path("data", "kafka", f"{topic.name}-0")
        assert here.logs[live].records == there.logs[live].records
        assert sorted(here.logs) == sorted(there.logs) and here.logs[live].records
    finally:
        assert admin.delete_topic(bootstrap, topic.name, timeout_s=30)
    assert not admin.delete_topic(bootstrap, topic.name, timeout_s=30)
    with pytest.raises(admin.AdminError, match="no-such-topic"):
        admin.describe_topics(bootstrap, ["no-such-topic"])
