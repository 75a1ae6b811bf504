"""corrupt-segment with ``segment: closed`` on a real 3-node cluster (Kafka 4.4).

A closed segment lies below the recovery point once Kafka has flushed it on
roll and checkpointed that point, and an unclean start re-reads only the
segments above it.  So the damage is not found on start: no recovery line,
the broker's log end unchanged.  It shows when the damaged bytes are read:
a consumer that checks CRCs, fetching from the damaged replica as leader,
and replica verification's dump of that replica.

The topic rolls a segment at 1 MiB (4.x's smallest ``segment.bytes``), and
the brokers checkpoint their recovery points every second instead of every
60 s, so that the closed segment is below the checkpoint when the fault
starts (the fault records ``below_recovery_point``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _kafka_clusters import SHARED_CLUSTER, running_cluster
from _waiting import wait_for

from harness import admin, kafka_db
from harness.cluster import Cluster
from harness.log_dump import CORRUPTION_NEEDLES
from harness.node import Node, quote
from harness.spec import NEWEST_KAFKA, ClusterSpec, TopicSpec
from kafka_chaos import replica_verify
from nemeses.base import FaultOp
from nemeses.corrupt_segment import CorruptSegment

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
]

TOPIC = "cs-closed"
MESSAGES = 300
VALUE_BYTES = 4096  # 300 x 4 KiB rolls one 1 MiB segment


def _produce(bootstrap: str) -> int:
    from confluent_kafka import Producer

    acked = []
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
         "linger.ms": 5, "log_level": 0}
    )  # fmt: skip
    for i in range(MESSAGES):
        producer.produce(TOPIC, value=_value(i), on_delivery=lambda e, m: acked.append(e))
    assert producer.flush(90) == 0, "messages still queued after 90 s"
    return sum(1 for e in acked if e is None)


def _segments(node: Node) -> list[str]:
    return sorted(p.name for p in Path(node.path("data", "kafka", f"{TOPIC}-0")).glob("*.log"))


def _checkpointed(node: Node) -> int | None:
    """The recovery point of TOPIC-0 in ``node``'s recovery-point-offset-checkpoint."""
    path = Path(node.path("data", "kafka", "recovery-point-offset-checkpoint"))
    for line in path.read_text().splitlines()[2:] if path.exists() else []:
        topic, part, offset = line.rsplit(" ", 2)
        if topic == TOPIC and part == "0":
            return int(offset)
    return None


def _value(i: int) -> bytes:
    return f"{i:08d}".encode() * (VALUE_BYTES // 8)


def _consume_all(bootstrap: str, check_crcs: bool) -> tuple[int, int, list[str]]:
    """Read TOPIC-0 from offset 0 to its end, stopping at the client's first error:
    (values read, how many differ from what was sent, the errors)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"cs-read-{check_crcs}",
         "enable.auto.commit": False, "check.crcs": check_crcs, "log_level": 0}
    )  # fmt: skip
    read, damaged, errors = 0, 0, []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        for _ in range(60):
            for m in consumer.consume(500, timeout=1.0):
                if m.error():
                    errors.append(str(m.error()))
                else:
                    read += 1
                    damaged += m.value() != _value(m.offset())
            if read >= MESSAGES or errors:
                break
    finally:
        consumer.close()
    return read, damaged, errors


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    spec = ClusterSpec(
        name=f"{SHARED_CLUSTER}-cs"[:32], nodes=3, kafka_version=NEWEST_KAFKA,
        broker_config={"log.flush.offset.checkpoint.interval.ms": "1000"},
    )  # fmt: skip
    with running_cluster(spec) as c:
        yield c


def test_a_closed_segment_damaged_below_the_recovery_point(
    cluster: Cluster, tmp_path: Path
) -> None:
    bootstrap = cluster.bootstrap_servers()
    spec = TopicSpec(
        name=TOPIC, partitions=1, min_insync_replicas=2, config={"segment.bytes": "1048576"}
    )
    admin.create_topic(bootstrap, spec)
    kafka_db.wait_healthy(cluster, 120.0, topic=TOPIC)
    assert _produce(bootstrap) == MESSAGES
    [state] = admin.describe_topics(bootstrap, [TOPIC], timeout_s=30)
    node = cluster.node(state.leader)  # the preferred replica: it can be made leader again
    rolled = wait_for(f"{node.name} to roll {TOPIC}-0", lambda: _segments(node)[1:], 60.0)
    second = int(rolled[0][:-4])
    wait_for(
        f"{node.name} to checkpoint a recovery point past {second}",
        lambda: (_checkpointed(node) or 0) >= second,
        60.0,
    )
    op = FaultOp(1, "corrupt-segment", 0.0, 1.0, [node.name],
                 params={"mode": "flip", "bytes": 8, "segment": "closed"})  # fmt: skip
    kind = CorruptSegment()
    pid = Path(kafka_db.KAFKA.pid_file(node)).read_text().strip()
    kind.apply(cluster, op, [node], TOPIC)
    print(f"{node.name}: broker pid {pid}, running after apply: {kafka_db.is_running(node)}")
    assert not kafka_db.is_running(node)
    done = op.resolved["corrupted"][node.name]
    print(json.dumps(done, indent=1))
    assert (done["which"], done["base_offset"], done["next_base_offset"]) == ("closed", 0, second)
    assert done["below_recovery_point"] is True
    kind.heal(cluster, op, [node])
    kafka_db.wait_healthy(cluster, 180.0, topic=TOPIC)
    assert Path(kafka_db.KAFKA.pid_file(node)).read_text().strip() != pid, "not restarted"

    # The topic is new, so every line about it in the broker's log is from this test;
    # its first "Completed load" is the restart's (the broker started before the topic).
    # wait_healthy can pass on the killed broker's registration, before the restart loads.
    def restarted_lines() -> list[str]:
        logs = node.run(f"cat {quote(node.path('logs'))}/server.log*", timeout=30).stdout
        mine = [x for x in logs.splitlines() if f"{TOPIC}-0" in x]
        loaded = any("Completed load of Log" in x for x in mine)
        return mine if loaded else []

    mine = wait_for(f"{node.name} to load {TOPIC}-0 again", restarted_lines, 120.0)
    print("\n".join(x for x in mine if "LogLoader" in x or "Completed load" in x or "WARN" in x))
    # Not re-read on start: only the active segment (from the recovery point) is recovered.
    assert not [x for x in mine if any(n in x for n in CORRUPTION_NEEDLES)], mine
    recovered = [x for x in mine if "Recovering unflushed segment" in x]
    assert recovered and all(f"Recovering unflushed segment {second}." in x for x in recovered)
    ends = wait_for(
        f"{TOPIC}-0's end offset", lambda: admin.end_offsets(bootstrap, TOPIC, 1, 10.0), 60.0
    )
    assert ends[0] == MESSAGES

    # The damaged replica leads again (it is the preferred one): reads come from its disk.
    print(admin.elect_leaders(bootstrap, [(TOPIC, 0)]))
    wait_for(
        f"{node.name} to lead {TOPIC}-0 again",
        lambda: admin.describe_topics(bootstrap, [TOPIC], timeout_s=10)[0].leader == node.node_id,
        60.0,
    )
    read, damaged, errors = _consume_all(bootstrap, check_crcs=True)
    print(f"check.crcs=true: read {read}, damaged {damaged}, errors {errors}")
    assert read < MESSAGES and "failed CRC32C check" in errors[0]
    read, damaged, errors = _consume_all(bootstrap, check_crcs=False)
    print(f"check.crcs=false (librdkafka's default): read {read}, damaged {damaged}, {errors}")
    assert (read, errors) == (MESSAGES, [])  # no error: the damage reaches the application
    assert damaged >= 1

    result = replica_verify.verify(cluster, TOPIC, tmp_path)
    print(replica_verify.summary(result))
    [bad] = result["invalid_batches"]  # the dump's own CRC check of the damaged batch
    assert (bad["node"], bad["partition"], bad["base_offset"]) == (node.name, 0, 0)
    assert bad["last_offset"] == second - 1
    [unread] = result["unreadable"]
    assert (unread["node"], unread["partition"], unread["segment"]) == (
        node.name, 0, done["segment"],
    )  # fmt: skip
    assert result["corruptions"] == []  # no broker ever found it
    [part] = result["partitions"]
    assert part["agree"] is False  # the others' copies differ from the damaged leader's
