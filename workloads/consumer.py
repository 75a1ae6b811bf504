"""Consumer workers: polls, commits and group membership, exactly as observed.

Each worker is one slot of one consumer group.  An incarnation is one
``Consumer`` under one process number; a crash (requested by the failover
schedule, or an unexpected exception) records ``crash`` and continues under a
new process number.  Every blocking call is bounded: ``consume`` has a
timeout, and calls without one (synchronous commit, close) run through
``bounded_call``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_STORED, Consumer, KafkaError, KafkaException, TopicPartition
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.kafka_clients import (
    CLIENT_LOGGER,
    CallTimedOut,
    bounded_call,
    close_quietly,
)
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.workloads import client_logs
from kafka_chaos.workloads.committed import NO_OFFSET, FetchFailed, Pairs, Triples, record_fetch
from kafka_chaos.workloads.delivery_errors import classify_commit, error_name
from kafka_chaos.workloads.values import Counter, decode_key, decode_payload
from kafka_chaos.workloads.worker import ClientSlot

log = logging.getLogger(__name__)

POLL_BATCH = 500
POLL_TIMEOUT_S = 0.5
COMMIT_TIMEOUT_S = 10.0
SOCKET_TIMEOUT_MS = 10_000
AUTO_COMMIT_INTERVAL_MS = 1000


def consumer_config(spec: TestSpec, bootstrap: str, group: str, client_id: str) -> dict[str, Any]:
    c = spec.consumer
    if c.mode not in ("subscribe", "assign"):
        raise ConfigError(f"consumer.mode: {c.mode!r} is not 'subscribe' or 'assign'")
    if c.commit not in ("auto", "manual"):
        raise ConfigError(f"consumer.commit: {c.commit!r} is not 'auto' or 'manual'")
    if c.session_timeout_ms < 1000:
        raise ConfigError(f"consumer.session_timeout_ms too small: {c.session_timeout_ms}")
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "enable.auto.commit": c.commit == "auto",
        "auto.commit.interval.ms": AUTO_COMMIT_INTERVAL_MS,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        **membership_config(spec),
        "socket.timeout.ms": SOCKET_TIMEOUT_MS,
        "logger": CLIENT_LOGGER,
    }


def membership_config(spec: TestSpec) -> dict[str, Any]:
    """How a consumer takes part in its group: the protocol and its timing.

    Under the classic protocol the client sets its session and heartbeat;
    under KIP-848 (``group.protocol=consumer``) the broker does
    (``group.consumer.*`` in harness/kafka_config.py) and librdkafka refuses
    the client-side keys.
    """
    c = spec.consumer
    timing = {
        # A worker never goes long without polling (bounded commits), so a
        # short limit evicts a wedged member quickly instead of after 5 min.
        "max.poll.interval.ms": max(c.session_timeout_ms, 30_000),
    }
    if c.group_protocol == "consumer":
        return {"group.protocol": "consumer", **timing}
    return {
        "session.timeout.ms": c.session_timeout_ms,
        "heartbeat.interval.ms": max(100, c.session_timeout_ms // 3),
        **timing,
    }


def protocol_field(spec: TestSpec) -> dict[str, str]:
    """``{"protocol": "consumer"}`` on subscribe lines under KIP-848; classic adds nothing,
    so classic histories stay byte-identical to older ones."""
    p = spec.consumer.group_protocol
    return {} if p == "classic" else {"protocol": p}


def tp_list(partitions: list[TopicPartition]) -> list[list[Any]]:
    return [[tp.topic, tp.partition] for tp in partitions]


def record_of(msg: Any) -> dict[str, Any]:
    return {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "key": decode_key(msg.key()),
        "value": decode_payload(msg.value()),
    }


def next_offsets(records: list[dict[str, Any]]) -> list[list[Any]]:
    """The commit for a batch: one past the highest offset read per partition."""
    top: dict[tuple[str, int], int] = {}
    for r in records:
        k = (r["topic"], r["partition"])
        top[k] = max(top.get(k, -1), r["offset"])
    return [[t, p, o + 1] for (t, p), o in sorted(top.items())]


def poll_once(
    consumer: Consumer, history: HistoryWriter, process: int, extra: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """One recorded, bounded poll.  Returns the records it read.

    Errors delivered alongside records are added as ``errors`` on the ok
    line; a poll that returned only errors read nothing, so it is a ``fail``.
    """
    history.append(process, "invoke", "poll", dict(extra) if extra else None)
    try:
        msgs = consumer.consume(num_messages=POLL_BATCH, timeout=POLL_TIMEOUT_S)
    except KafkaException as e:
        history.append(process, "info", "poll", {"error": _exc_name(e), **(extra or {})})
        raise
    records, errors = [], []
    for m in msgs:
        err = m.error()
        if err is None:
            records.append(record_of(m))
        else:
            errors.append(error_name(err))
    if errors and not records:
        history.append(process, "fail", "poll", {"error": ",".join(errors), **(extra or {})})
        return []
    value: dict[str, Any] = {"records": records, **(extra or {})}
    if errors:
        value["errors"] = errors
    history.append(process, "ok", "poll", value)
    return records


def _exc_name(e: BaseException) -> str:
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        return e.args[0].name()
    return f"{type(e).__name__}: {e}"


class Ownership:
    """The partitions a group member owns, by the rebalances it recorded.

    A member that leaves its group by a clean close() owns nothing after it,
    but librdkafka does not always say so: a close that lands in the middle
    of a rebalance can deliver the assignment and then leave the group
    without the revocation callback (a CI run under load, 2026-11-26: a
    transactional member assigned two partitions at the run's end never
    recorded their revocation, so its ownership ran on through the drain).
    ``left_over`` after such a close is recorded as revoked, ``"closed": true``.
    """

    def __init__(self) -> None:
        self.owned: set[tuple[str, int]] = set()

    def update(self, assigned: list[Any], revoked: list[Any]) -> None:
        gone = {(t, p) for t, p in revoked}
        self.owned = (self.owned - gone) | {(t, p) for t, p in assigned}

    def left_over(self) -> list[list[Any]]:
        """What the member still owns, as the history lists partitions."""
        return [[t, p] for t, p in sorted(self.owned)]

    def closed(self, rebalance: Callable[..., None]) -> None:
        """After a close() that returned: record what is still owned as revoked,
        through the member's ``rebalance(assigned, revoked, **extra)``."""
        if self.owned:
            with contextlib.suppress(ValueError):  # the history is closed: the run is over
                rebalance([], self.left_over(), closed=True)


class ConsumerWorker(ClientSlot):
    """One slot of a consumer group, running incarnations until stopped."""

    def __init__(
        self,
        spec: TestSpec,
        bootstrap: str,
        history: HistoryWriter,
        processes: Counter,
        group: str,
        slot: int,
        stop: threading.Event,
    ) -> None:
        super().__init__(history, stop, f"consumer-{group}")
        self.spec = spec
        self.bootstrap = bootstrap
        self.processes = processes
        self.group = group
        self.slot = slot
        self.topic = spec.topic.name
        # What a subscribing member subscribes to: after a failover under
        # MirrorMaker's default policy, dc1's copy and dc2's own topic.
        self.topics = [self.topic]
        self._muted = False  # a crashed incarnation's late callbacks are not recorded
        self.ownership = Ownership()
        self._to_read: set[tuple[str, int]] = set()  # assigned, committed offsets not read yet

    def _begin_incarnation(self) -> None:
        """A new process number and a clean slate: nothing owned, nothing muted."""
        self.process = self.processes.next()
        self._muted = False
        self.ownership = Ownership()
        self._to_read = set()
        self._crash_reason = None

    def _read_committed(self, consumer: Any, at: str) -> None:
        """Record the group's committed offsets: of the partitions assigned since
        the last read (``at="assigned"``), or of all owned (``at="end"``)."""
        if at == "assigned":
            wanted = self._to_read
        elif self.spec.consumer.mode == "assign":
            wanted = {(self.topic, p) for p in self._assigned_partitions()}
        else:
            wanted = set(self.ownership.owned)
        self._to_read = set()
        if wanted:
            record_fetch(
                self.history, self.process, self.group, [list(tp) for tp in wanted], at,
                lambda parts: self._committed_offsets(consumer, parts), _exc_name,
            )  # fmt: skip

    def _committed_offsets(self, consumer: Any, partitions: Pairs) -> Triples:
        """librdkafka's OffsetFetch, bounded by its own timeout."""
        tps = [TopicPartition(t, p) for t, p in partitions]
        got = consumer.committed(tps, timeout=COMMIT_TIMEOUT_S)
        bad = {error_name(tp.error) for tp in got if tp.error is not None}
        if bad:
            raise FetchFailed(",".join(sorted(bad)))
        return [[tp.topic, tp.partition, tp.offset if tp.offset >= 0 else NO_OFFSET] for tp in got]

    def _incarnation(self) -> None:
        self._begin_incarnation()
        conf = consumer_config(
            self.spec, self.bootstrap, self.group, f"{self.spec.name}-c{self.process}"
        )
        if self.spec.consumer.commit == "auto":
            conf["on_commit"] = self._committed
        conf.update(client_logs.librdkafka(self.spec, "consumer", conf["client.id"]))
        consumer = Consumer(conf)
        try:
            self._join(consumer)
            while not self.stop_event.is_set():
                if self._crash_reason is not None:
                    self._record_crash(self._crash_reason)
                    close_quietly(consumer, f"close crashed consumer {self.process}")
                    return
                records = poll_once(consumer, self.history, self.process)
                self.stats.polls += 1
                self.stats.records += len(records)
                if records and self.spec.consumer.commit == "manual":
                    self._commit(consumer, next_offsets(records))
                if self._to_read:
                    self._read_committed(consumer, "assigned")
            self._read_committed(consumer, "end")
        except BaseException:
            self._muted = True
            close_quietly(consumer, f"close failed consumer {self.process}")
            raise
        if close_quietly(consumer, f"close consumer {self.process}"):
            self._left()

    def _left(self) -> None:
        """After a clean close: what it owned is revoked, and it has left its group.

        The ``leave`` line ends the member's part in the group checks, as a
        crash does: a group whose members all left (a failover moved them to
        another cluster) has no partition it must still cover.
        """
        self.ownership.closed(self._rebalance)
        with contextlib.suppress(ValueError):  # the history is closed: the run is over
            self.history.append(self.process, "info", "leave", {"group": self.group})

    def _join(self, consumer: Consumer) -> None:
        if self.spec.consumer.mode == "subscribe":
            value = self._subscribe_value()
            self.history.append(self.process, "invoke", "subscribe", value)
            consumer.subscribe(
                list(self.topics),
                on_assign=self._assigned,
                on_revoke=self._revoked,
                on_lost=self._lost,
            )
            self.history.append(self.process, "ok", "subscribe", value)
            return
        parts = self._assigned_partitions()
        value = {"group": self.group, "partitions": [[self.topic, p] for p in parts]}
        self.history.append(self.process, "invoke", "assign", value)
        consumer.assign([TopicPartition(self.topic, p, OFFSET_STORED) for p in parts])
        self.history.append(self.process, "ok", "assign", value)
        self._to_read = {(self.topic, p) for p in parts}

    def _subscribe_value(self) -> dict[str, Any]:
        return {"group": self.group, "topics": list(self.topics), **protocol_field(self.spec)}

    def _assigned_partitions(self) -> list[int]:
        c = self.spec.consumer
        return assigned_partitions(self.spec.topic.partitions, c.workers_per_group, self.slot)

    def _commit(self, consumer: Consumer, offsets: list[list[Any]]) -> None:
        value = {"group": self.group, "offsets": offsets}
        self.history.append(self.process, "invoke", "commit", value)
        tps = [TopicPartition(t, p, o) for t, p, o in offsets]
        try:
            result = bounded_call(
                lambda: consumer.commit(offsets=tps, asynchronous=False),
                COMMIT_TIMEOUT_S,
                "commit",
            )
        except CallTimedOut as e:
            self.history.append(self.process, "info", "commit", {**value, "error": str(e)})
            self.stats.commits_failed += 1
            raise  # the consumer is wedged in commit: crash this incarnation
        except KafkaException as e:
            err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
            type_ = classify_commit(err) if err is not None else "info"
            self.history.append(self.process, type_, "commit", {**value, "error": _exc_name(e)})
            self.stats.commits_failed += 1
            return
        errors = [tp.error for tp in (result or []) if tp.error is not None]
        if errors:
            kinds = {classify_commit(e) for e in errors}
            type_ = "info" if "info" in kinds else "fail"
            names = ",".join(sorted({error_name(e) for e in errors}))
            self.history.append(self.process, type_, "commit", {**value, "error": names})
            self.stats.commits_failed += 1
        else:
            self.history.append(self.process, "ok", "commit", value)
            self.stats.commits_ok += 1

    # -- callbacks: they run inside consume()/close() on this worker's thread

    def _committed(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        if self._muted:
            return
        offsets = [
            [tp.topic, tp.partition, tp.offset]
            for tp in partitions
            if tp.error is None and tp.offset >= 0
        ]
        if err is None and offsets:
            self.history.append(
                self.process, "ok", "commit", {"group": self.group, "offsets": offsets}
            )
            self.stats.commits_ok += 1
        elif err is not None and err.code() != KafkaError._NO_OFFSET:
            self.stats.commits_failed += 1

    def _rebalance(self, assigned: list[Any], revoked: list[Any], **extra: Any) -> None:
        if self._muted:
            return
        self.ownership.update(assigned, revoked)
        self._to_read = (self._to_read | {(t, p) for t, p in assigned}) - {
            (t, p) for t, p in revoked
        }
        value = {"group": self.group, "assigned": assigned, "revoked": revoked, **extra}
        self.history.append(self.process, "ok", "rebalance", value)
        self.stats.rebalances += 1

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalance(tp_list(partitions), [])

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalance([], tp_list(partitions))

    def _lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalance([], tp_list(partitions), lost=True)

    def _record_crash(self, reason: str) -> None:
        self._muted = True
        super()._record_crash(reason)


def assigned_partitions(partitions: int, workers: int, slot: int) -> list[int]:
    """Assign mode: worker ``slot`` owns every partition p with p % workers == slot."""
    if not 0 <= slot < workers:
        raise ConfigError(f"consumer slot {slot} outside 0..{workers - 1}")
    return [p for p in range(partitions) if p % workers == slot]
