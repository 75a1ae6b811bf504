"""What MirrorMaker 2 keeps on dc2, read as an operator's tools read it.

- Checkpoints (``dc1.checkpoints.internal``): per group and partition, the
  upstream offset the group had committed on dc1 and the offset MirrorMaker
  translated it to on dc2.  A failover applies them to the group on dc2,
  as ``RemoteClusterUtils.translateOffsets`` plus an offset commit would.
- MirrorMaker's source offsets (``mm2-offsets.dc1.internal``, Connect's
  offsets topic): how far into each dc1 partition it has copied.  The run
  waits on them after the heal, so "absent from dc2" is judged only once
  MirrorMaker had the chance to catch up.

Records are decoded here in Python: the checkpoint format is Kafka's
protocol ``Struct`` (int16-length strings, big-endian ints) behind a
version header, and the offsets are Connect's JSON.  Every call is bounded.
"""

from __future__ import annotations

import json
import struct
import time
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from kafka_chaos.harness import admin
from kafka_chaos.harness.kafka_clients import CLIENT_LOGGER

CALL_TIMEOUT_S = 10.0
UNKNOWN_TOPIC = KafkaError.UNKNOWN_TOPIC_OR_PART
READ_QUIET_S = 1.0  # a compacted internal topic is read until a poll this long brings nothing


class Undecodable(ValueError):
    """A record of an internal topic is not in the format this module knows."""


@dataclass(frozen=True)
class Checkpoint:
    group: str
    topic: str  # dc2's name of the topic
    partition: int
    upstream: int  # the group's committed offset on dc1
    downstream: int  # its translation on dc2


def _string(buf: bytes, at: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, at)
    if n < 0 or at + 2 + n > len(buf):
        raise Undecodable(f"bad string length {n} at byte {at}")
    return buf[at + 2 : at + 2 + n].decode(), at + 2 + n


def decode_checkpoint(key: bytes, value: bytes) -> Checkpoint:
    """Kafka's ``Checkpoint`` key (group, topic, partition) and value (v0 + offsets)."""
    try:
        group, at = _string(key, 0)
        topic, at = _string(key, at)
        (partition,) = struct.unpack_from(">i", key, at)
        version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    except (struct.error, UnicodeDecodeError) as e:
        raise Undecodable(f"checkpoint record: {e}") from e
    if version != 0:
        raise Undecodable(f"checkpoint record version {version} (known: 0)")
    return Checkpoint(group, topic, partition, upstream, downstream)


def encode_checkpoint(c: Checkpoint) -> tuple[bytes, bytes]:
    """The inverse of ``decode_checkpoint`` (empty metadata): for tests."""

    def s(text: str) -> bytes:
        raw = text.encode()
        return struct.pack(">h", len(raw)) + raw

    key = s(c.group) + s(c.topic) + struct.pack(">i", c.partition)
    return key, struct.pack(">hqq", 0, c.upstream, c.downstream) + s("")


def decode_source_offset(key: bytes, value: bytes | None) -> tuple[str, int, int] | None:
    """(topic, partition, last copied offset) of a MirrorSourceConnector offset; None otherwise."""
    try:
        connector, part = json.loads(key)
        if connector != "MirrorSourceConnector" or value is None:
            return None
        return str(part["topic"]), int(part["partition"]), int(json.loads(value)["offset"])
    except (ValueError, KeyError, TypeError) as e:
        raise Undecodable(f"Connect offset record: {e}") from e


def _reader(bootstrap: str) -> Consumer:
    """A bounded consumer in a group of its own that commits nothing."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kafka-chaos-mirror-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "socket.timeout.ms": int(CALL_TIMEOUT_S * 1000),
            # read_committed (librdkafka's default) stops at the last stable
            # offset: with exactly-once, MirrorMaker's own transaction is often
            # open above it.  The EOF event says a partition was read that far.
            "enable.partition.eof": True,
            "logger": CLIENT_LOGGER,
        }
    )


class IncompleteRead(RuntimeError):
    """An internal topic was not read whole in time: dc2 did not answer, or not enough."""


RETRY_PAUSE_S = 0.5


def _read_all(bootstrap: str, topic: str, timeout_s: float) -> list[Any]:
    """Every record of ``topic`` (all partitions, from the start), within ``timeout_s``.

    A topic that does not exist holds nothing.  While dc2 does not answer (its
    broker restarting) the read is tried again; one that cannot finish raises
    ``IncompleteRead``: offsets translated from a part of the checkpoints, as
    if it were all of them, would hide that the operator's tool failed.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return _read_once(bootstrap, topic, deadline)
        except KafkaException as e:
            if time.monotonic() + RETRY_PAUSE_S >= deadline:
                raise IncompleteRead(f"{topic}: dc2 did not answer within {timeout_s:.0f} s "
                                     f"({e})") from e  # fmt: skip
            time.sleep(RETRY_PAUSE_S)


def _read_once(bootstrap: str, topic: str, deadline: float) -> list[Any]:
    consumer = _reader(bootstrap)
    try:
        left = max(0.5, deadline - time.monotonic())
        meta = consumer.list_topics(topic, timeout=min(CALL_TIMEOUT_S, left))
        found = meta.topics.get(topic)
        if found is None or found.error is not None and found.error.code() == UNKNOWN_TOPIC:
            return []
        if found.error is not None:
            raise KafkaException(found.error)
        parts = list(found.partitions)
        ends = admin.end_offsets(
            bootstrap, topic, len(parts), max(0.5, deadline - time.monotonic())
        )
        if len(ends) < len(parts):  # a leader did not answer: the whole read is tried again
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{topic}: end offsets"))
        consumer.assign([TopicPartition(topic, p, 0) for p in parts if ends[p] > 0])
        # A partition is read whole at its high watermark, or at its last stable
        # offset when a transaction is open above that (the EOF event).
        behind = {p for p in parts if ends[p] > 0}
        out = []
        while behind:
            if time.monotonic() >= deadline:
                raise IncompleteRead(f"{topic}: partitions {sorted(behind)} not read to their "
                                     "end in time")  # fmt: skip
            msg = consumer.poll(min(READ_QUIET_S, max(0.05, deadline - time.monotonic())))
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    behind.discard(msg.partition())
                continue
            if msg.offset() + 1 >= ends[msg.partition()]:
                behind.discard(msg.partition())
            out.append(msg)
        return out
    finally:
        consumer.close()


def checkpoints(
    bootstrap: str, topic: str, groups: list[str], timeout_s: float
) -> list[Checkpoint]:
    """The latest checkpoint of each (group, topic, partition) of ``groups``."""
    latest: dict[tuple[str, str, int], Checkpoint] = {}
    for msg in _read_all(bootstrap, topic, timeout_s):
        if msg.key() is None or msg.value() is None:
            continue
        c = decode_checkpoint(msg.key(), msg.value())
        if c.group in groups:
            latest[(c.group, c.topic, c.partition)] = c
    return sorted(latest.values(), key=lambda c: (c.group, c.topic, c.partition))


def copied_offsets(
    bootstrap: str, offsets_topic: str, topic: str, timeout_s: float
) -> dict[int, int]:
    """partition -> the last dc1 offset MirrorMaker says it copied of ``topic``."""
    last: dict[int, int] = {}
    for msg in _read_all(bootstrap, offsets_topic, timeout_s):
        if msg.key() is None:
            continue
        decoded = decode_source_offset(msg.key(), msg.value())
        if decoded and decoded[0] == topic:
            last[decoded[1]] = decoded[2]
    return last


def lagging(copied: dict[int, int], dc1_ends: dict[int, int]) -> dict[int, int]:
    """partition -> records MirrorMaker has yet to copy (only those behind)."""
    behind = {}
    for p, end in dc1_ends.items():
        done = copied.get(p, -1) + 1
        if end > done:
            behind[p] = end - done
    return behind


def commit_group_offsets(
    bootstrap: str, group: str, offsets: list[tuple[str, int, int]], timeout_s: float
) -> None:
    """Set ``group``'s committed offsets (the group must have no members)."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    if not offsets:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": CLIENT_LOGGER})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for t, p, o in offsets])
    futures = admin.alter_consumer_group_offsets([request], request_timeout=timeout_s)
    for future in futures.values():
        result = future.result(timeout=timeout_s)
        bad = [tp for tp in result.topic_partitions if tp.error is not None]
        if bad:
            raise KafkaException(bad[0].error)
