"""Share-group members (KIP-932): acquire records under a lock, acknowledge each one.

A member polls, decides per record whether to accept, release or reject it
(``AckPolicy``), and commits those acknowledgements at once with
``commit_sync``, recording every step as docs/history.md describes
(share-subscribe, share-poll, share-ack, share-close, crash).

A crash here is a member that stops: it records ``crash``, then holds its
records without polling or acknowledging for longer than the lock duration,
so the broker must take them back by lock expiry and hand them to someone
else, and only then closes, unrecorded.  That is the failure share groups
exist to survive: a consumer that dies holding work.

The share drain (``share_drain``) runs after the workload: fresh members
accept everything until nothing has been delivered for longer than a lock
duration, so every record still deliverable has had its chance.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

from harness.spec import TestSpec
from workloads import client_logs
from workloads.consumer import (
    CLOSE_TIMEOUT_S,
    COMMIT_TIMEOUT_S,
    POLL_TIMEOUT_S,
    SOCKET_TIMEOUT_MS,
    CallTimedOut,
    bounded_call,
    close_quietly,
)
from workloads.consumer import record_of as consumer_record
from workloads.delivery_errors import error_name
from workloads.history import HistoryWriter
from workloads.values import CLIENT_LOGGER, Counter
from workloads.worker import ClientSlot

log = logging.getLogger(__name__)

ACK_TYPES = {
    "accept": AcknowledgeType.ACCEPT,
    "release": AcknowledgeType.RELEASE,
    "reject": AcknowledgeType.REJECT,
}
CRASH_HOLD_MARGIN_S = 2.0  # a crashed member holds its records this long past their lock
DRAIN_QUIET_MARGIN_S = 3.0


def share_group_name(spec: TestSpec, k: int) -> str:
    """Per-topic share group names: a run's groups never carry state over."""
    return f"{spec.topic.name}-s{k}"


def share_config(bootstrap: str, group: str, client_id: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "share.acknowledgement.mode": "explicit",
        "socket.timeout.ms": SOCKET_TIMEOUT_MS,
        "logger": CLIENT_LOGGER,
    }


def group_settings(spec: TestSpec) -> dict[str, str]:
    """Group configs set before members join: read from the log's start, the run's lock
    and delivery limit (a new share group would otherwise start at the latest offset)."""
    c = spec.consumer
    return {
        "share.auto.offset.reset": "earliest",
        "share.record.lock.duration.ms": str(c.share_lock_ms),
        "share.delivery.count.limit": str(c.share_delivery_limit),
    }


@dataclass
class AckPolicy:
    """How a member acknowledges each record: seeded, so a run can be replayed."""

    release: float = 0.0
    reject: float = 0.0
    rng: random.Random = field(default_factory=random.Random)

    @classmethod
    def accept_all(cls) -> AckPolicy:
        return cls()

    def choose(self) -> str:
        if not (self.release or self.reject):
            return "accept"
        draw = self.rng.random()
        if draw < self.reject:
            return "reject"
        if draw < self.reject + self.release:
            return "release"
        return "accept"


class GroupProgress:
    """When each share group last got a delivery: the share drain waits for quiet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self.delivered: dict[str, int] = {}

    def note(self, group: str, records: int) -> None:
        with self._lock:
            self.delivered[group] = self.delivered.get(group, 0) + records
            if records:
                self._last[group] = time.monotonic()

    def quiet_for(self, group: str, since: float) -> float:
        with self._lock:
            return time.monotonic() - max(self._last.get(group, since), since)


def record_of(msg: Any) -> dict[str, Any]:
    """A delivered record as a poll's records are written, plus its delivery count."""
    return {**consumer_record(msg), "delivery_count": msg.delivery_count()}


class ShareWorker(ClientSlot):
    """One member slot of a share group, running incarnations until stopped."""

    def __init__(
        self,
        spec: TestSpec,
        bootstrap: str,
        history: HistoryWriter,
        processes: Counter,
        group: str,
        stop: threading.Event,
        progress: GroupProgress,
        policy: AckPolicy,
        final: bool = False,
    ) -> None:
        super().__init__(history, stop, f"share-{group}")
        self.spec = spec
        self.bootstrap = bootstrap
        self.processes = processes
        self.group = group
        self.progress = progress
        self.policy = policy
        self.extra = {"final": True} if final else {}
        self.topic = spec.topic.name

    # -- the client: every call that touches librdkafka (workloads/java/share_consumer.py
    # overrides these for Kafka's Java client) --------------------------------

    def _new_consumer(self) -> Any:
        client = f"{self.spec.name}-s{self.process}"
        return ShareConsumer(
            share_config(self.bootstrap, self.group, client)
            | client_logs.librdkafka(self.spec, "share", client)
        )

    def _subscribe_call(self, consumer: Any) -> None:
        consumer.subscribe([self.topic])

    def _fetch(self, consumer: Any) -> tuple[list[tuple[Any, dict[str, Any]]], list[str]]:
        """One bounded poll: its (message, record) deliveries and its errors."""
        try:
            msgs = consumer.poll(POLL_TIMEOUT_S)
        except KafkaException as e:
            raise ClientCallFailed(str(e)) from e
        delivered, errors = [], []
        for m in list(msgs or []):
            if m.error() is None:
                delivered.append((m, record_of(m)))
            else:
                errors.append(error_name(m.error()))
        return delivered, errors

    def _ack(self, consumer: Any, msg: Any, kind: str) -> None:
        """Acknowledge one delivery; raises if the client refuses (no longer in flight)."""
        consumer.acknowledge(msg, ACK_TYPES[kind])

    def _commit_sync(self, consumer: Any) -> list[dict[str, Any]]:
        """Commit the acknowledgements (bounded): the partitions whose commit failed."""
        result = bounded_call(
            lambda: consumer.commit_sync(COMMIT_TIMEOUT_S), COMMIT_TIMEOUT_S + 5, "share commit"
        )
        return [
            {"topic": tp.topic, "partition": tp.partition, "error": str(exc)}
            for tp, exc in (result or {}).items()
            if exc is not None
        ]

    # -- one member ----------------------------------------------------------

    def _incarnation(self) -> None:
        self.process = self.processes.next()
        self._crash_reason = None
        consumer = self._new_consumer()
        try:
            self._subscribe(consumer)
            while not self.stop_event.is_set():
                records = self._poll(consumer)
                if self._crash_reason is not None:  # between the poll and its acks: it holds them
                    self._crash(consumer, self._crash_reason)
                    return
                if records:
                    self._acknowledge(consumer, records)
        except BaseException:
            close_quietly(consumer, f"close failed share member {self.process}")
            raise
        self._close(consumer)

    def _subscribe(self, consumer: Any) -> None:
        c = self.spec.consumer
        value = {
            "group": self.group,
            "topics": [self.topic],
            "lock_ms": c.share_lock_ms,
            "delivery_limit": c.share_delivery_limit,
        }
        self.history.append(self.process, "invoke", "share-subscribe", value)
        self._subscribe_call(consumer)
        self.history.append(self.process, "ok", "share-subscribe", value)

    def _poll(self, consumer: Any) -> list[tuple[Any, dict[str, Any]]]:
        """One recorded poll; returns (message, record) pairs: the deliveries."""
        self.history.append(self.process, "invoke", "share-poll", dict(self.extra) or None)
        try:
            delivered, errors = self._fetch(consumer)
        except ClientCallFailed as e:
            self.history.append(
                self.process, "info", "share-poll", {"group": self.group, "error": str(e)}
            )
            raise
        self.stats.polls += 1
        if errors and not delivered:
            value = {"group": self.group, "error": ",".join(errors)}
            self.history.append(self.process, "fail", "share-poll", value)
            self.stats.poll_errors += 1
            return []
        value = {"group": self.group, "records": [r for _, r in delivered], **self.extra}
        if errors:
            value["errors"] = errors
        self.history.append(self.process, "ok", "share-poll", value)
        self.stats.records += len(delivered)
        self.progress.note(self.group, len(delivered))
        return delivered

    def _acknowledge(self, consumer: Any, delivered: list[tuple[Any, dict]]) -> None:
        """Acknowledge every delivery of a poll, then commit them in one ``commit_sync``."""
        acks, refused = [], []
        for msg, record in delivered:
            kind = self.policy.choose()
            ack = {k: record[k] for k in ("topic", "partition", "offset", "value")}
            ack["type"] = kind
            try:
                self._ack(consumer, msg, kind)
                acks.append(ack)
            except Exception as e:  # e.g. IllegalStateException: no longer in flight
                refused.append((ack, _error_text(e)))
        if refused:
            value = {"group": self.group, "acks": [a for a, _ in refused]}
            self.history.append(self.process, "invoke", "share-ack", value)
            error = "; ".join(sorted({why for _, why in refused}))
            self.history.append(self.process, "fail", "share-ack", {**value, "error": error})
        if acks:
            self._commit(consumer, acks)

    def _commit(self, consumer: Any, acks: list[dict[str, Any]]) -> None:
        value = {"group": self.group, "acks": acks}
        self.history.append(self.process, "invoke", "share-ack", value)
        try:
            failed = self._commit_sync(consumer)
        except CallTimedOut as e:
            self.history.append(self.process, "info", "share-ack", {**value, "error": str(e)})
            self.stats.commits_failed += 1
            raise  # wedged in commit: this incarnation is done
        except Exception as e:  # KafkaException and the client's state errors: outcome unknown
            error = _error_text(e)
            self.history.append(self.process, "info", "share-ack", {**value, "error": error})
            self.stats.commits_failed += 1
            return
        self.history.append(self.process, "ok", "share-ack", {**value, "failed": failed})
        if failed:
            self.stats.commits_failed += 1
        else:
            self.stats.commits_ok += 1

    def _close(self, consumer: Any) -> None:
        """Leave cleanly: everything this member held was acknowledged after its last poll."""
        close_quietly(consumer, f"close share member {self.process}")
        self.history.append(self.process, "ok", "share-close", {"group": self.group})

    def _crash(self, consumer: Any, reason: str) -> None:
        """Stop acting while holding the last poll's records, past their lock, then vanish."""
        self._record_crash(reason)
        hold_s = self.spec.consumer.share_lock_ms / 1000 + CRASH_HOLD_MARGIN_S
        self.stop_event.wait(hold_s)
        close_quietly(consumer, f"close crashed share member {self.process}")


class ClientCallFailed(Exception):
    """A client call raised; the message is the error as the history names it."""


def _error_text(e: Exception) -> str:
    return str(e) if isinstance(e, ClientCallFailed) else f"{type(e).__name__}: {e}"


@dataclass
class ShareDrainResult:
    group: str
    complete: bool
    quiet_s: float
    delivered: int

    def __str__(self) -> str:
        state = "complete" if self.complete else "cut short"
        return f"share drain of {self.group}: {state}, {self.delivered} deliveries"


def share_drain(
    spec: TestSpec,
    bootstrap: str,
    history: HistoryWriter,
    processes: Counter,
    groups: list[str],
    timeout_s: float,
    make_worker: Callable[..., ShareWorker] = ShareWorker,
) -> list[ShareDrainResult]:
    """Fresh members accept everything until no group has had a delivery for ``quiet_s``.

    ``quiet_s`` exceeds the lock duration: a record held by a member that
    stopped comes back within one lock, and is then delivered again.  One
    ``share-drain`` line per group says whether it went quiet in time.
    """
    quiet_s = spec.consumer.share_lock_ms / 1000 + DRAIN_QUIET_MARGIN_S
    progress = GroupProgress()
    stop = threading.Event()
    workers = [
        make_worker(
            spec, bootstrap, history, processes, group, stop, progress,
            AckPolicy.accept_all(), final=True,
        )
        for group in groups
        for _ in range(max(1, spec.consumer.workers_per_group))
    ]  # fmt: skip
    start = time.monotonic()
    for w in workers:
        w.start()
    deadline = start + timeout_s
    quiet = {g: False for g in groups}
    while time.monotonic() < deadline:
        quiet = {g: progress.quiet_for(g, start) >= quiet_s for g in groups}
        if all(quiet.values()):
            break
        time.sleep(0.5)
    stop.set()
    for w in workers:
        w.join(COMMIT_TIMEOUT_S + CLOSE_TIMEOUT_S + 2)
    results = []
    for g in groups:
        result = ShareDrainResult(g, quiet[g], quiet_s, progress.delivered.get(g, 0))
        history.append(
            processes.next(),
            "ok",
            "share-drain",
            {
                "group": g,
                "final": True,
                "complete": result.complete,
                "quiet_s": quiet_s,
                "delivered": result.delivered,
            },
        )
        results.append(result)
    return results
