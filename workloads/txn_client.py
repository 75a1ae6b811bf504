"""One transactional process: a transactional producer and a consumer, one txn at a time.

Jepsen's Kafka client, in confluent-kafka: each process owns a producer with
its own ``transactional.id`` and a consumer, and runs transactions of
micro-ops (sends and polls).  Each transaction is recorded as one ``txn``
operation (docs/history.md): the invoke before anything reaches Kafka, the
completion once the outcome is known.  Error handling is in
``workloads.txn_errors``; this module only applies it:

* ``fail``: the client aborted (on purpose, or after an abortable error)
  and the abort succeeded.  The consumer then seeks back to where the
  transaction began polling, since Kafka does not rewind it (KAFKA-17582),
  and is recorded as a ``seek`` line.
* ``info``, or a fatal error: the producer's state is unknown or unusable,
  so this incarnation ends (``Teardown``); the worker records ``crash`` and
  starts a new client under a new process number.  Its consumer restarts
  from the group's committed offsets, which only committed transactions
  moved: that is the rewind for an unknown outcome.

Every call that can block is bounded: librdkafka's own timeout, and
``bounded_call`` around it in case a call ignores it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_STORED, Consumer, KafkaException, Producer, TopicPartition
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.kafka_clients import (
    CLIENT_LOGGER,
    CLOSE_TIMEOUT_S,
    CallTimedOut,
    bounded_call,
    close_quietly,
)
from kafka_chaos.harness.kafka_names import transactional_id
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.workloads import client_logs, txn_spec
from kafka_chaos.workloads.consumer import (
    POLL_BATCH,
    SOCKET_TIMEOUT_MS,
    Ownership,
    assigned_partitions,
    membership_config,
    next_offsets,
    protocol_field,
    record_of,
    tp_list,
)
from kafka_chaos.workloads.delivery_errors import error_name
from kafka_chaos.workloads.txn_errors import Action, Decision, decide
from kafka_chaos.workloads.values import Counter, encode_payload, key_and_partition

log = logging.getLogger(__name__)

SLACK_S = 5.0  # bounded_call's margin over a librdkafka timeout
# A poll inside a transaction waits briefly: it returns as soon as records
# arrive, and an empty one must not hold the transaction open (0.5 s polls
# held each transaction open ~700 ms and capped a process at 1.5 txns/s).
TXN_POLL_TIMEOUT_S = 0.1
MIXED, CTP = "mixed", "ctp"
CLIENT_ABORT = "aborted by the client (txn.abort_probability)"


class Teardown(Exception):
    """This client cannot go on: record a crash and start a new one."""


def output_topic(topic: str) -> str:
    """Consume-transform-produce writes here; the run's topic is its input."""
    return f"{topic}-out"


def txn_group(spec: TestSpec) -> str:
    return f"{spec.topic.name}-txn"


def validate(spec: TestSpec) -> None:
    """Refuse a transactional configuration that cannot mean what it says."""
    t = txn_spec.of(spec)
    if t.mode not in (MIXED, CTP):
        raise ConfigError(f"txn.mode: {t.mode!r} is not 'mixed' or 'ctp'")
    if t.max_ops < 1:
        raise ConfigError(f"txn.max_ops must be at least 1, got {t.max_ops}")
    if t.processes < 1:
        raise ConfigError(f"txn.processes must be at least 1, got {t.processes}")
    if not 0.0 <= t.abort_probability <= 1.0:
        raise ConfigError(f"txn.abort_probability must be in [0, 1], got {t.abort_probability}")
    if t.isolation_level not in ("read_committed", "read_uncommitted"):
        raise ConfigError(
            f"txn.isolation_level: {t.isolation_level!r} is not read_committed or read_uncommitted"
        )
    if t.mode == CTP and t.isolation_level != "read_committed":
        raise ConfigError(
            "txn.mode ctp needs txn.isolation_level read_committed: the exactly-once "
            "check is meaningless when the input may contain aborted records"
        )
    if spec.consumer.mode not in ("subscribe", "assign"):
        raise ConfigError(f"consumer.mode: {spec.consumer.mode!r} is not subscribe or assign")
    if not 0.0 <= t.stall_probability <= 1.0 or t.stall_s < 0:
        raise ConfigError("txn.stall_probability must be in [0, 1] and txn.stall_s >= 0")
    if t.client_timeout_s <= 0 or t.transaction_timeout_ms < 1000:
        raise ConfigError("txn.client_timeout_s must be > 0 and txn.transaction_timeout_ms >= 1000")


def producer_config(spec: TestSpec, bootstrap: str, process: int, slot: int) -> dict[str, Any]:
    t, p = txn_spec.of(spec), spec.producer
    delivery_ms = min(p.delivery_timeout_ms, t.transaction_timeout_ms)
    return {
        "bootstrap.servers": bootstrap,
        "client.id": f"{spec.name}-t{process}",
        "transactional.id": transactional_id(spec.topic.name, slot),
        "transaction.timeout.ms": t.transaction_timeout_ms,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": p.linger_ms,
        "request.timeout.ms": min(p.request_timeout_ms, delivery_ms),
        "delivery.timeout.ms": delivery_ms,
        # librdkafka refuses a transactional producer whose socket timeout
        # exceeds transaction.timeout.ms + 100.
        "socket.timeout.ms": min(SOCKET_TIMEOUT_MS, t.transaction_timeout_ms),
        "logger": CLIENT_LOGGER,
    }


def consumer_config(spec: TestSpec, bootstrap: str, process: int) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": txn_group(spec),
        "client.id": f"{spec.name}-t{process}",
        "isolation.level": txn_spec.of(spec).isolation_level,
        "enable.auto.commit": False,  # offsets are committed inside transactions
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        **membership_config(spec),
        "socket.timeout.ms": SOCKET_TIMEOUT_MS,
        "logger": CLIENT_LOGGER,
    }


@dataclass
class TxnStats:
    """Written by the owning worker's thread; read racily by the display."""

    ok: int = 0
    fail: int = 0
    info: int = 0
    client_aborts: int = 0
    sends_committed: int = 0
    polls: int = 0
    records: int = 0
    seeks: int = 0
    crashes: int = 0


class TxnClient:
    """One incarnation of a transactional process."""

    def __init__(
        self,
        spec: TestSpec,
        bootstrap: str,
        history: HistoryWriter,
        process: int,
        slot: int,
        values: Counter,
        rng: random.Random,
        stats: TxnStats,
        crash_requested: Callable[[], str | None],
    ) -> None:
        self.spec = spec
        self.history = history
        self.process = process
        self.slot = slot
        self.values = values
        self.rng = rng
        self.stats = stats
        self.crash_requested = crash_requested
        self.timeout = txn_spec.of(spec).client_timeout_s
        self.group = txn_group(spec)
        self.topic = spec.topic.name
        self.out_topic = output_topic(self.topic) if txn_spec.of(spec).mode == CTP else self.topic
        self._rebalanced: set[tuple[str, int]] = set()
        self._muted = False
        self.ownership = Ownership()
        self._create_clients(bootstrap)

    # -- the client: every call that touches librdkafka (workloads/java/txn_client.py
    # overrides these for Kafka's Java client) --------------------------------

    def _create_clients(self, bootstrap: str) -> None:
        # One client id for both (the process); their debug logs are apart.
        name = f"{self.spec.name}-t{self.process}"
        self.producer = Producer(
            producer_config(self.spec, bootstrap, self.process, self.slot)
            | client_logs.librdkafka(self.spec, "producer", f"{name}-producer")
        )
        self.consumer = Consumer(
            consumer_config(self.spec, bootstrap, self.process)
            | client_logs.librdkafka(self.spec, "consumer", f"{name}-consumer")
        )

    def _init_transactions(self) -> None:
        self._call(lambda: self.producer.init_transactions(self.timeout), "init_transactions")

    def _subscribe(self) -> None:
        self.consumer.subscribe(
            [self.topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost
        )

    def _assign(self, partitions: list[int]) -> None:
        self.consumer.assign([TopicPartition(self.topic, p, OFFSET_STORED) for p in partitions])

    def _begin(self) -> None:
        self._call(self.producer.begin_transaction, "begin_transaction", bounded=False)

    def _commit_transaction(self) -> None:
        self._call(lambda: self.producer.commit_transaction(self.timeout), "commit_transaction")

    def _abort_transaction(self) -> None:
        self._call(lambda: self.producer.abort_transaction(self.timeout), "abort_transaction")

    def _seek(self, topic: str, partition: int, offset: int) -> bool:
        """Move the consumer's position; False if the partition is no longer ours."""
        try:
            self.consumer.seek(TopicPartition(topic, partition, offset))
        except KafkaException as e:
            log.debug("seek %s/%d: %s", topic, partition, e)
            return False
        return True

    def _decide(self, e: Exception, stage: str) -> Decision | None:
        """The decision for a client error raised at ``stage``; None if ``e`` is not one."""
        return decide(e, stage) if isinstance(e, KafkaException) else None

    # -- life cycle --------------------------------------------------------

    def open(self) -> None:
        """init_transactions (fences our predecessor), then join the group."""
        self._init_transactions()
        if self.spec.consumer.mode == "subscribe":
            value = {"group": self.group, "topics": [self.topic], **protocol_field(self.spec)}
            self.history.append(self.process, "invoke", "subscribe", value)
            self._subscribe()
            self.history.append(self.process, "ok", "subscribe", value)
            return
        processes = txn_spec.of(self.spec).processes
        parts = assigned_partitions(self.spec.topic.partitions, processes, self.slot)
        value = {"group": self.group, "partitions": [[self.topic, p] for p in parts]}
        self.history.append(self.process, "invoke", "assign", value)
        self._assign(parts)
        self.history.append(self.process, "ok", "assign", value)

    def close(self, record_revocations: bool) -> None:
        """Close the consumer cleanly (bounded); the producer is simply dropped.

        After a clean stop the revocation close() delivers is recorded: it
        ends this member's ownership, which would otherwise run on to the end
        of the history and overlap its successors'.  After a crash it is not:
        the crash line already ended it, and the client is gone.

        Dropping, not flushing: an open transaction is left for the next
        incarnation's init_transactions to abort, as after a real crash.
        """
        self._muted = not record_revocations
        if close_quietly(self.consumer, f"close txn consumer {self.process}"):
            self.ownership.closed(self._rebalance)  # close() may not have said so
        try:
            bounded_call(lambda: self.producer.purge(), CLOSE_TIMEOUT_S, "purge")
        except Exception as e:
            log.debug("purge txn producer %s: %s", self.process, e)

    # -- one transaction ---------------------------------------------------

    def run_one(self) -> str:
        """Run one transaction; returns its outcome.  Raises Teardown."""
        ops = self._plan()
        invoke = [dict(m) for m in ops]
        self.history.append(self.process, "invoke", "txn", {"group": self.group, "ops": invoke})
        self._rebalanced = set()
        first_polled: dict[tuple[str, int], int] = {}
        records: list[dict[str, Any]] = []
        for m in ops:
            m["skipped"] = True  # until it runs
        try:
            self._begin()
            for k in range(len(invoke)):  # ctp appends its sends to ``ops`` as it goes
                reason = self.crash_requested()
                if reason:
                    raise Teardown(reason)  # mid-transaction: its outcome stays unknown
                m = ops[k]
                del m["skipped"]
                if m["f"] == "send":
                    self._send(m)
                else:
                    polled = self._poll(m)
                    records += polled
                    for r in polled:
                        first_polled.setdefault((r["topic"], r["partition"]), r["offset"])
                    if txn_spec.of(self.spec).mode == CTP:
                        ops += self._transforms(polled)
            self._flush(ops)
            stalled = self._maybe_stall()
            if self.rng.random() < txn_spec.of(self.spec).abort_probability:
                return self._abort(ops, CLIENT_ABORT, first_polled, client=True)
            offsets = next_offsets(records)
            if offsets:
                self._send_offsets(offsets)
            self._commit_transaction()
        except _TxnError as e:
            return self._failed(ops, e, first_polled)
        self._complete("ok", ops, offsets=offsets, stalled_s=stalled)
        self.stats.ok += 1
        self.stats.sends_committed += sum(1 for m in ops if m["f"] == "send")
        return "ok"

    def _maybe_stall(self) -> float | None:
        """A client pause before commit (``txn.stall_probability``); its length, if any."""
        t = txn_spec.of(self.spec)
        if t.stall_probability <= 0 or self.rng.random() >= t.stall_probability:
            return None
        time.sleep(t.stall_s)
        return t.stall_s

    def _plan(self) -> list[dict[str, Any]]:
        """The micro-ops: 1..max_ops sends and polls (ctp: one poll, sends follow it)."""
        if txn_spec.of(self.spec).mode == CTP:
            return [{"f": "poll"}]
        n = self.rng.randint(1, txn_spec.of(self.spec).max_ops)
        ops: list[dict[str, Any]] = []
        for _ in range(n):
            if self.rng.random() < 0.5:
                ops.append({"f": "poll"})
            else:
                value = self.values.next()
                key, partition = key_and_partition(value, self.spec.topic.partitions)
                ops.append(
                    {"f": "send", "topic": self.topic, "key": key, "value": value,
                     "partition": partition}
                )  # fmt: skip
        return ops

    def _transforms(self, polled: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One output send per input record, to the same partition number (keeps order)."""
        out = []
        for r in polled:
            if r["value"] is None:
                continue
            value = self.values.next()
            out.append(
                {"f": "send", "topic": self.out_topic, "key": str(r["value"]), "value": value,
                 "partition": r["partition"], "source": r["value"]}
            )  # fmt: skip
            self._send(out[-1])
        return out

    def _send(self, m: dict[str, Any]) -> None:
        partition = m["partition"]
        m["partition"] = m["offset"] = None  # until its delivery report

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                m["error"] = error_name(err)
                return
            m["partition"], m["offset"] = msg.partition(), msg.offset()

        try:
            self.producer.produce(
                m["topic"],
                value=encode_payload(m["value"], self.spec.producer.message_bytes),
                key=m["key"].encode(),
                partition=partition,
                on_delivery=delivered,
            )
        except KafkaException as e:
            m["error"] = error_name(e.args[0]) if e.args else str(e)
            raise _TxnError(decide(e, "send")) from e
        except BufferError as e:
            m["error"] = "_QUEUE_FULL"
            raise _TxnError(Decision(Action.ABORT, "fail", "_QUEUE_FULL: local queue full")) from e
        self.producer.poll(0)

    def _poll(self, m: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            msgs = self.consumer.consume(num_messages=POLL_BATCH, timeout=TXN_POLL_TIMEOUT_S)
        except KafkaException as e:
            m["records"], m["error"] = [], error_name(e.args[0]) if e.args else str(e)
            raise _TxnError(Decision(Action.ABORT, "fail", f"poll failed: {m['error']}")) from e
        records, errors = [], []
        for msg in msgs:
            if msg.error() is None:
                records.append(record_of(msg))
            else:
                errors.append(error_name(msg.error()))
        m["records"] = records
        self.stats.polls += 1
        self.stats.records += len(records)
        if errors:
            m["error"] = ",".join(errors)
            if not records:
                raise _TxnError(Decision(Action.ABORT, "fail", f"poll failed: {m['error']}"))
        return records

    def _flush(self, ops: list[dict[str, Any]]) -> None:
        """Wait for every delivery report (bounded); a send without one cannot commit."""
        left = self._call(lambda: self.producer.flush(self.timeout), "flush")
        failed = [m for m in ops if m["f"] == "send" and "error" in m]
        if left or failed:
            why = f"{left} send(s) undelivered after {self.timeout:g}s" if left else (
                f"send failed: {failed[0]['error']}"
            )  # fmt: skip
            raise _TxnError(Decision(Action.ABORT, "fail", why))

    def _send_offsets(self, offsets: list[list[Any]]) -> None:
        tps = [TopicPartition(t, p, o) for t, p, o in offsets]
        metadata = self.consumer.consumer_group_metadata()
        self._call(
            lambda: self.producer.send_offsets_to_transaction(tps, metadata, self.timeout),
            "send_offsets_to_transaction",
            stage="offsets",
        )

    # -- outcomes ----------------------------------------------------------

    def _failed(
        self, ops: list[dict[str, Any]], e: _TxnError, first_polled: dict[tuple[str, int], int]
    ) -> str:
        d = e.decision
        if d.action is Action.ABORT:
            return self._abort(ops, d.why, first_polled)
        self._complete(d.outcome, ops, error=d.why)
        raise Teardown(f"transaction {d.outcome}: {d.why}")

    def _abort(
        self,
        ops: list[dict[str, Any]],
        why: str,
        first_polled: dict[tuple[str, int], int],
        client: bool = False,
    ) -> str:
        try:
            self._abort_transaction()
        except _TxnError as e:
            self._complete("info", ops, error=f"{why}; then the abort failed: {e.decision.why}")
            raise Teardown(f"abort failed: {e.decision.why}") from e
        self._complete("fail", ops, error=why)
        self.stats.client_aborts += client
        if txn_spec.of(self.spec).rewind:
            self._rewind(first_polled)
        return "fail"

    def _rewind(self, first_polled: dict[tuple[str, int], int]) -> None:
        """Seek back to the first offset this aborted transaction polled, per partition."""
        moved = []
        for (topic, partition), offset in sorted(first_polled.items()):
            # Revoked meanwhile: its new owner reads from the group's commit.
            if self._seek(topic, partition, offset):
                moved.append([topic, partition, offset])
        if moved:
            value = {"group": self.group, "offsets": moved, "reason": "rewind after abort"}
            self.history.append(self.process, "ok", "seek", value)
            self.stats.seeks += 1

    def _complete(
        self,
        outcome: str,
        ops: list[dict[str, Any]],
        error: str | None = None,
        offsets: list[list[Any]] | None = None,
        stalled_s: float | None = None,
    ) -> None:
        value: dict[str, Any] = {"group": self.group, "ops": ops}
        if stalled_s:
            value["stalled_s"] = stalled_s
        if offsets:
            value["offsets"] = offsets
        if self._rebalanced:
            value["rebalanced"] = [list(tp) for tp in sorted(self._rebalanced)]
        if error is not None:
            value["error"] = error
        self.history.append(self.process, outcome, "txn", value)
        if outcome == "fail":
            self.stats.fail += 1
        elif outcome == "info":
            self.stats.info += 1

    def _call(
        self, fn: Callable[[], Any], what: str, stage: str | None = None, bounded: bool = True
    ) -> Any:
        """A transactional API call; its errors become a ``_TxnError`` with a decision."""
        stage = stage or _STAGES.get(what, "commit")
        try:
            return bounded_call(fn, self.timeout + SLACK_S, what) if bounded else fn()
        except CallTimedOut as e:
            outcome = "info" if stage in ("commit", "abort") else "fail"
            raise _TxnError(Decision(Action.GIVE_UP, outcome, f"_TIMED_OUT: {e}")) from e
        except Exception as e:
            decision = self._decide(e, stage)
            if decision is None:
                raise
            if stage == "init":
                raise Teardown(f"{what}: {decision.why.split(':', 1)[0]}") from e
            raise _TxnError(decision) from e

    # -- rebalance callbacks (inside consume(), on this thread) ---------------

    def _rebalance(self, assigned: list[Any], revoked: list[Any], **extra: Any) -> None:
        if self._muted:
            return
        self.ownership.update(assigned, revoked)
        self._rebalanced.update((t, p) for t, p in assigned + revoked)
        value = {"group": self.group, "assigned": assigned, "revoked": revoked, **extra}
        self.history.append(self.process, "ok", "rebalance", value)

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalance(tp_list(partitions), [])

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalance([], tp_list(partitions))

    def _lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalance([], tp_list(partitions), lost=True)


_STAGES = {
    "init_transactions": "init",
    "begin_transaction": "begin",
    "flush": "send",
    "send_offsets_to_transaction": "offsets",
    "commit_transaction": "commit",
    "abort_transaction": "abort",
}


class _TxnError(Exception):
    def __init__(self, decision: Decision) -> None:
        super().__init__(decision.why)
        self.decision = decision
