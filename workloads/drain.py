"""The final drain: read every partition from the beginning to its high watermark.

After faults are healed, a fresh consumer outside every test group assigns
all partitions at the beginning and polls until each partition's position
reaches the high watermark.  The watermarks come from a second, read_uncommitted
client: a read_committed query answers with the last stable offset, which stops
short of the high watermark while any transaction is open (a crashed
transactional client's, until the coordinator aborts it), and a drain that
stopped there would call the committed records behind it unseen.
Whatever the checkers call "lost" must survive
this read, so the drain reports any partition it could not finish instead of
pretending.  Its polls carry ``"final": true``, and it ends with one ``drain``
line per partition stating the log start offset, the high watermark and how
far it read: the proof ``acked-lost`` needs that the drain was complete.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.kafka_clients import CLIENT_LOGGER, close_quietly
from kafka_chaos.workloads.consumer import SOCKET_TIMEOUT_MS, poll_once

log = logging.getLogger(__name__)

WATERMARK_TIMEOUT_S = 5.0
REQUERY_EVERY_S = 5.0
FINAL = {"final": True}


@dataclass
class DrainResult:
    complete: bool  # every partition reached its high watermark
    reached: dict[int, int]  # partition -> next offset the drain would read
    high_watermarks: dict[int, int | None]  # None: never obtained
    unreached: list[int]  # partitions short of their watermark
    records: int
    elapsed_s: float
    errors: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        state = "complete" if self.complete else f"INCOMPLETE (unreached {self.unreached})"
        return f"drain {state}: {self.records} records in {self.elapsed_s:.1f}s"


def drain_config(bootstrap: str, topic: str) -> dict[str, object]:
    """A consumer in a group of its own, committing nothing."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"{topic}-drain-{uuid.uuid4().hex[:8]}",
        "client.id": f"{topic}-drain",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",  # librdkafka's default, said out loud
        "enable.partition.eof": False,
        "socket.timeout.ms": SOCKET_TIMEOUT_MS,
        "logger": CLIENT_LOGGER,
    }


def watermark_config(drain: dict[str, object]) -> dict[str, object]:
    """The drain's watermark client: read_uncommitted, so "latest" is the high watermark."""
    return {
        **drain,
        "group.id": f"{drain['group.id']}-watermarks",
        "client.id": f"{drain['client.id']}-watermarks",
        "isolation.level": "read_uncommitted",
    }


def final_drain(
    bootstrap: str,
    topic: str,
    partitions: int,
    history: HistoryWriter,
    process: int,
    timeout_s: float,
) -> DrainResult:
    """Poll until every partition is read up to its high watermark, or ``timeout_s``."""
    started = time.monotonic()
    deadline = started + timeout_s
    conf = drain_config(bootstrap, topic)
    consumer = Consumer(conf)
    watermarks = Consumer(watermark_config(conf))
    reached = dict.fromkeys(range(partitions), 0)
    hw: dict[int, int | None] = dict.fromkeys(range(partitions))
    starts: dict[int, int | None] = dict.fromkeys(range(partitions))
    errors: list[str] = []
    total = 0
    try:
        value = {
            "group": conf["group.id"],
            "partitions": [[topic, p] for p in range(partitions)],
            **FINAL,
        }
        history.append(process, "invoke", "assign", value)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        history.append(process, "ok", "assign", value)
        last_query = 0.0
        while True:
            pending = [p for p in range(partitions) if hw[p] is None or reached[p] < hw[p]]
            now = time.monotonic()
            if pending and now - last_query >= REQUERY_EVERY_S:
                _query_watermarks(watermarks, topic, pending, hw, starts, reached, errors, deadline)
                last_query = time.monotonic()
                pending = [p for p in range(partitions) if hw[p] is None or reached[p] < hw[p]]
            if not pending or time.monotonic() >= deadline:
                break
            try:
                records = poll_once(consumer, history, process, FINAL)
            except Exception as e:  # recorded as info by poll_once; keep draining
                errors.append(f"poll: {e}")
                continue
            total += len(records)
            for r in records:
                if r["topic"] == topic:
                    reached[r["partition"]] = max(reached[r["partition"]], r["offset"] + 1)
            _advance_to_positions(consumer, topic, reached)
    finally:
        close_quietly(consumer, "close drain consumer")
        close_quietly(watermarks, "close drain watermark client")
        _record_bounds(history, process, topic, starts, hw, reached)
    unreached = [p for p in range(partitions) if hw[p] is None or reached[p] < hw[p]]
    return DrainResult(
        complete=not unreached,
        reached=reached,
        high_watermarks=hw,
        unreached=unreached,
        records=total,
        elapsed_s=time.monotonic() - started,
        errors=errors[-10:],
    )


def _record_bounds(
    history: HistoryWriter,
    process: int,
    topic: str,
    starts: dict[int, int | None],
    hw: dict[int, int | None],
    reached: dict[int, int],
) -> None:
    """One ``drain`` line per partition: what the drain can prove it read.

    Written even when the drain was cut short (``reached`` below the high
    watermark, or a watermark never obtained: null), so the check can say
    which partitions it could not judge instead of guessing.
    """
    for p in sorted(reached):
        value = {
            "topic": topic,
            "partition": p,
            "log_start": starts[p],
            "high_watermark": hw[p],
            "reached": reached[p],
            **FINAL,
        }
        history.append(process, "ok", "drain", value)


def _advance_to_positions(consumer: Consumer, topic: str, reached: dict[int, int]) -> None:
    """Count what the consumer skipped as reached: transaction markers and aborted records.

    A transactional log ends in a commit or abort marker that no poll
    returns, so the last record read is short of the high watermark for
    good; the consumer's position moves past it.
    """
    try:
        positions = consumer.position([TopicPartition(topic, p) for p in reached])
    except Exception as e:  # a position is only a shortcut: the records still count
        log.debug("drain positions: %s", e)
        return
    for tp in positions:
        if tp.error is None and tp.offset >= 0:
            reached[tp.partition] = max(reached[tp.partition], tp.offset)


def _query_watermarks(
    consumer: Consumer,
    topic: str,
    pending: list[int],
    hw: dict[int, int | None],
    starts: dict[int, int | None],
    reached: dict[int, int],
    errors: list[str],
    deadline: float,
) -> None:
    """Fetch high watermarks (bounded); an empty log's start counts as reached."""
    for p in pending:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=min(WATERMARK_TIMEOUT_S, left), cached=False
            )
        except Exception as e:
            errors.append(f"watermarks of partition {p}: {e}")
            continue
        hw[p], starts[p] = high, low
        reached[p] = max(reached[p], low)  # records below the log start are gone, not pending
