"""Clock faults on a real local cluster: a broker's clock really moves, alone, and comes back.

The evidence is Kafka's own: a topic with ``message.timestamp.type=LogAppendTime``
stamps each record with its leader's wall clock when it appends it.  With a
topic led by the faulted broker and one led by a bystander, a record's stamp
minus the harness's clock at send shows each broker's offset: local nodes
share one kernel clock, so only libfaketime can make them differ.

Runs on the shared ``kafka_cluster`` (``kc-test``), or on the running
cluster ``KC_NEMESIS_CLUSTER`` names.  Every test heals and leaves the
cluster healthy.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from _waiting import wait_for
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_chaos.harness import kafka_config as kc
from kafka_chaos.harness import kafka_db
from kafka_chaos.harness.backends import load_cluster, procs
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.node import Node
from kafka_chaos.nemeses import clock, process
from kafka_chaos.nemeses.base import FaultOp
from kafka_chaos.nemeses.runner import apply, heal, heal_cluster

pytestmark = pytest.mark.integration

HEALTHY_TIMEOUT_S = 150.0
# How far a measured offset may lie outside the window the send was in:
# the harness reads its clock before and after, so only clock-read jitter.
SLACK_S = 0.25


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    name = os.environ.get("KC_NEMESIS_CLUSTER")
    yield load_cluster(name) if name else request.getfixturevalue("kafka_cluster")


@pytest.fixture(scope="module")
def victim(cluster: Cluster) -> Node:
    """A broker that is not the active controller: its clock is the one moved."""
    controller = kafka_db.controller_id(cluster)
    return next(n for n in reversed(cluster.nodes) if n.node_id != controller)


@pytest.fixture(scope="module")
def bystander(cluster: Cluster, victim: Node) -> Node:
    return next(n for n in cluster.nodes if n is not victim)


def _create_topic(cluster: Cluster, leader: Node) -> str:
    """A one-partition topic stamped with LogAppendTime, on ``leader`` alone."""
    name = f"clock-{leader.name}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
    new = NewTopic(
        name,
        num_partitions=1,  # librdkafka wants it stated beside an assignment
        replica_assignment=[[leader.node_id]],
        config={"message.timestamp.type": "LogAppendTime"},
    )
    admin.create_topics([new], request_timeout=30)[name].result(60)
    return name


@pytest.fixture(scope="module")
def topics(cluster: Cluster, victim: Node, bystander: Node) -> Iterator[dict[str, str]]:
    made = {
        "victim": _create_topic(cluster, victim),
        "bystander": _create_topic(cluster, bystander),
    }
    yield made
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
    for fut in admin.delete_topics(list(made.values()), request_timeout=30).values():
        fut.result(60)


@pytest.fixture
def healthy(cluster: Cluster) -> Iterator[None]:
    kafka_db.wait_healthy(cluster, HEALTHY_TIMEOUT_S)
    try:
        yield
    finally:
        heal_cluster(cluster)
        kafka_db.wait_healthy(cluster, HEALTHY_TIMEOUT_S)


def clock_offset(cluster: Cluster, topic: str) -> tuple[float, float]:
    """Bounds on the leader's clock offset (s): produce, consume, compare stamps.

    The record was appended between the harness's clock readings ``t0`` and
    ``t1``, so the leader's offset lies within [stamp - t1, stamp - t0].
    The stamp is read back by a consumer and must equal the produce reply's.
    """
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all"})
    acked: list = []
    t0 = time.time()
    producer.produce(topic, b"tick", on_delivery=lambda err, msg: acked.append((err, msg)))
    producer.flush(60)
    t1 = time.time()
    assert len(acked) == 1 and acked[0][0] is None, acked
    msg = acked[0][1]
    kind, stamp = msg.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers(),
            "group.id": f"clock-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, msg.offset())])
        deadline = time.monotonic() + 60
        read = None
        while read is None and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is not None and not m.error():
                read = m
    finally:
        consumer.close()
    assert read is not None, "the record could not be read back"
    assert read.timestamp() == (TIMESTAMP_LOG_APPEND_TIME, stamp)
    return stamp / 1000 - t1, stamp / 1000 - t0


def assert_offset(cluster: Cluster, topic: str, expected_s: float) -> tuple[float, float]:
    """The leader's clock is ``expected_s`` off, once its JVM has read the offset
    file again (the nemesis does not wait for that; it takes up to 1 s)."""
    time.sleep(kc.FAKETIME_REFRESH_S + 0.2)
    low, high = clock_offset(cluster, topic)
    assert low - SLACK_S <= expected_s <= high + SLACK_S, (
        f"{topic}: clock offset within [{low:.3f}, {high:.3f}] s, expected {expected_s} s"
    )
    return low, high


def op(f: str, node: Node, op_id: int, duration_s: float = 60.0, **params: int) -> FaultOp:
    return FaultOp(op_id, f, 0.0, duration_s, [node.name], params=dict(params))


def offset_file(node: Node) -> str:
    return node.run(f"cat {kc.faketime_file(node)}", timeout=15).stdout.strip()


Log = Callable[[str, object], None]


def span(bounds: tuple[float, float]) -> str:
    return f"[{bounds[0]:.3f}, {bounds[1]:.3f}] s"


def test_a_bump_moves_one_brokers_clock_and_heal_puts_it_back(
    cluster: Cluster,
    victim: Node,
    topics: dict[str, str],
    healthy: None,
    record_property: Log,
) -> None:
    assert cluster.clock == "faketime"
    assert kafka_db.unfaked_services(cluster, victim) == []
    before = assert_offset(cluster, topics["victim"], 0.0)
    bump = op("clock-bump", victim, 9101, delta_ms=45_000)
    apply(cluster, bump)
    apply(cluster, bump)  # twice is harmless
    try:
        bumped = assert_offset(cluster, topics["victim"], 45.0)
        # one kernel clock, yet the other brokers keep true time
        other = assert_offset(cluster, topics["bystander"], 0.0)
    finally:
        heal(cluster, bump)
    heal(cluster, bump)
    assert offset_file(victim) == "+0"
    healed = assert_offset(cluster, topics["victim"], 0.0)
    record_property(
        "logged",
        f"{victim.name} offset before {span(before)}, bumped +45 s {span(bumped)} "
        f"(bystander {span(other)}), healed {span(healed)}",
    )


def test_a_broker_restarted_during_a_bump_comes_back_on_the_bumped_clock(
    cluster: Cluster,
    victim: Node,
    topics: dict[str, str],
    healthy: None,
    record_property: Log,
) -> None:
    bump = op("clock-bump", victim, 9102, delta_ms=-30_000)
    apply(cluster, bump)
    try:
        process.kill(cluster, victim)
        assert not kafka_db.is_running(victim)
        process.ensure_running(cluster, victim)
        assert kafka_db.unfaked_services(cluster, victim) == []
        kafka_db.wait_healthy(cluster, HEALTHY_TIMEOUT_S, topic=topics["victim"])
        restarted = assert_offset(cluster, topics["victim"], -30.0)
    finally:
        heal(cluster, bump)
    healed = assert_offset(cluster, topics["victim"], 0.0)
    record_property(
        "logged", f"restarted at -30 s: offset {span(restarted)}, healed {span(healed)}"
    )


def test_a_strobe_flips_the_clock_and_stops_by_itself(
    cluster: Cluster,
    victim: Node,
    topics: dict[str, str],
    healthy: None,
    record_property: Log,
) -> None:
    pid_file = victim.path("run", clock.STROBE_PID)
    strobe = op("clock-strobe", victim, 9103, duration_s=14.0, delta_ms=20_000, period_ms=2_000)
    t_apply = time.monotonic()
    apply(cluster, strobe)
    # runs of samples on one offset: [offset, first and last sample time, samples]
    runs: list[list[float]] = []
    while time.monotonic() - t_apply < 10.0:
        low, high = clock_offset(cluster, topics["victim"])
        at = round(time.monotonic() - t_apply, 2)
        on = next((t for t in (0.0, 20.0) if low - SLACK_S <= t <= high + SLACK_S), None)
        assert on is not None, f"offset within {span((low, high))}: neither 0 s nor 20 s"
        if runs and runs[-1][0] == on:
            runs[-1][2:] = [at, runs[-1][3] + 1]
        else:
            runs.append([on, at, at, 1])
        time.sleep(0.1)
    record_property(
        "logged",
        "strobe of +20 s every 2 s, offset by time since apply: "
        + ", ".join(f"{o:+.0f} s at {a}-{b} s ({n} samples)" for o, a, b, n in runs),
    )
    assert len(runs) >= 4, f"the clock did not keep flipping: {runs}"
    # the loop ends by itself at the fault's duration, at true time, with no heal
    wait_for(
        "the strobe loop to end by itself",
        lambda: not victim.run(f"test -e {pid_file}", timeout=15, check=False).ok,
        timeout_s=30,
    )
    assert time.monotonic() - t_apply >= 14.0, "the loop ended before its duration"
    assert offset_file(victim) == "+0"
    assert_offset(cluster, topics["victim"], 0.0)
    assert not clock.reset(cluster, victim), "nothing was left to undo"


def test_heal_cluster_stops_a_strobe_and_resets_every_clock(
    cluster: Cluster, victim: Node, bystander: Node, topics: dict[str, str], healthy: None
) -> None:
    apply(cluster, op("clock-strobe", victim, 9104, duration_s=600.0, delta_ms=-25_000))
    apply(cluster, op("clock-bump", bystander, 9105, delta_ms=25_000))
    pid = victim.run(f"cat {victim.path('run', clock.STROBE_PID)}", timeout=15).stdout.strip()
    done = heal_cluster(cluster)
    assert f"{victim.name}: reset the clock" in done
    assert f"{bystander.name}: reset the clock" in done
    assert not procs.alive(int(pid))
    time.sleep(2.5)  # a loop still running would have flipped by now
    for topic in topics.values():
        assert_offset(cluster, topic, 0.0)
    assert heal_cluster(cluster) == [], "a second sweep finds nothing to undo"
