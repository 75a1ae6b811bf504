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
duration, and until every member that crashed has surely been fenced
(``DrainRule``), so every record still deliverable has had its chance.
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
from kafka_chaos.harness import admin
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.kafka_clients import (
    CLIENT_LOGGER,
    CLOSE_TIMEOUT_S,
    CallTimedOut,
    bounded_call,
    close_quietly,
)
from kafka_chaos.harness.kafka_config import SHARE_SESSION_TIMEOUT_MS
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.workloads import client_logs
from kafka_chaos.workloads.consumer import COMMIT_TIMEOUT_S, POLL_TIMEOUT_S, SOCKET_TIMEOUT_MS
from kafka_chaos.workloads.consumer import record_of as consumer_record
from kafka_chaos.workloads.delivery_errors import error_name
from kafka_chaos.workloads.values import Counter
from kafka_chaos.workloads.worker import ClientSlot

log = logging.getLogger(__name__)

ACK_TYPES = {
    "accept": AcknowledgeType.ACCEPT,
    "release": AcknowledgeType.RELEASE,
    "reject": AcknowledgeType.REJECT,
}
CRASH_HOLD_MARGIN_S = 2.0  # a crashed member holds its records this long past their lock
DRAIN_QUIET_MARGIN_S = 3.0
# After a crashed member's session could have expired: the coordinator's expiry
# timer, the new assignment reaching a drain member (its heartbeat, 3 s, and the
# group's assignment interval, 1 s) and that member's first fetch.
FENCE_MARGIN_S = 5.0
SESSION_KEY = "group.share.session.timeout.ms"
KAFKA_DEFAULT_SESSION_MS = 45000  # Kafka's own default, assumed when the brokers cannot say
SESSION_ASK_TIMEOUT_S = 10.0


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
        self.last_crash_at: float | None = None  # time.monotonic() of this slot's last crash

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

    def _record_crash(self, reason: str) -> None:
        """Every crash, the workload's own and a failed incarnation's (closed at once, its
        leave as losable): the share drain waits until the last one's session has expired."""
        self.last_crash_at = time.monotonic()
        super()._record_crash(reason)

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


def crashed_members_fenced_at(
    last_crash_at: float | None, lock_ms: int, session_s: float
) -> float | None:
    """When (``time.monotonic()``) every share member that crashed has surely been fenced
    by the group coordinator, even if its leave was lost; None when none crashed.

    Why: a crashed member keeps its partitions assigned to itself alone until it
    leaves or the coordinator fences it.  Its leave can be lost (a fault on the
    coordinator); then the coordinator last heard from it at the end of its close,
    at most its hold (lock + CRASH_HOLD_MARGIN_S) and a bounded close
    (CLOSE_TIMEOUT_S) after the crash, and fences it one session timeout later.
    FENCE_MARGIN_S then lets its partitions reach a drain member.  Before that, a
    quiet drain proves nothing about those partitions: nobody could fetch them
    (evidence/share-partitions-stuck-after-leader-blackhole-4.4.0).
    """
    if last_crash_at is None:
        return None
    hold_s = lock_ms / 1000 + CRASH_HOLD_MARGIN_S
    return last_crash_at + hold_s + CLOSE_TIMEOUT_S + session_s + FENCE_MARGIN_S


@dataclass(frozen=True)
class DrainRule:
    """When a share drain may call itself complete: pure timing, so it is testable.

    Complete means both: no delivery for ``quiet_s`` (longer than a lock, so an
    expired lock has redelivered), and ``fenced_at`` passed (every crashed
    member's session has expired, so its partitions went to a live member).
    The drain's own bound (``deadline``) cuts both; then it is not complete.
    """

    start: float
    deadline: float
    quiet_s: float
    fenced_at: float | None = None

    def done(self, now: float, quiet_for: float) -> bool:
        return quiet_for >= self.quiet_s and (self.fenced_at is None or now >= self.fenced_at)

    def sessions_expire_s(self) -> float:
        """Seconds from the drain's start it waited (or had to wait) for crashed
        members' sessions to expire; 0 when none crashed or they expired before."""
        if self.fenced_at is None:
            return 0.0
        return round(max(0.0, self.fenced_at - self.start), 1)

    def why_incomplete(self, now: float, quiet_for: float) -> str | None:
        """None if complete at ``now``, else why not, in one line."""
        if self.done(now, quiet_for):
            return None
        bound = round(self.deadline - self.start, 1)
        if self.fenced_at is not None and now < self.fenced_at:
            return (
                f"its {bound} s bound came before a crashed member's session could expire "
                f"(+{self.sessions_expire_s()} s): records it held or its partitions may "
                "never have been offered to a drain member"
            )
        return f"a delivery came within {self.quiet_s} s of its {bound} s bound"


def share_session_timeout_s(bootstrap: str) -> tuple[float, str]:
    """(the share-group session timeout the brokers run with, in seconds; where it came from).

    Asked, not assumed: a reused cluster keeps the config it started with, which
    may predate harness.kafka_config's 10 s.  The longest any broker reports (the
    coordinator may move).  When none answers, Kafka's default 45 s or the
    harness's value, whichever is longer, so the drain errs towards waiting."""
    try:
        values = admin.broker_config(bootstrap, SESSION_KEY, SESSION_ASK_TIMEOUT_S)
    except HarnessError as e:
        log.warning("share drain: the brokers' %s unknown (%s)", SESSION_KEY, e)
        values = {}
    numbers = [int(v) for v in values.values() if v.isdigit()]
    if numbers:
        return max(numbers) / 1000, "brokers"
    return max(KAFKA_DEFAULT_SESSION_MS, SHARE_SESSION_TIMEOUT_MS) / 1000, "assumed"


@dataclass
class ShareDrainResult:
    group: str
    complete: bool
    quiet_s: float
    delivered: int
    reason: str | None = None

    def __str__(self) -> str:
        state = "complete" if self.complete else f"cut short: {self.reason}"
        return f"share drain of {self.group}: {state}, {self.delivered} deliveries"


def share_drain(
    spec: TestSpec,
    bootstrap: str,
    history: HistoryWriter,
    processes: Counter,
    groups: list[str],
    timeout_s: float,
    make_worker: Callable[..., ShareWorker] = ShareWorker,
    last_crash_at: float | None = None,
    session: tuple[float, str] | None = None,
) -> list[ShareDrainResult]:
    """Fresh members accept everything until no group has had a delivery for ``quiet_s``
    and every crashed member (``last_crash_at``, monotonic) has surely been fenced.

    ``quiet_s`` exceeds the lock duration: a record held by a member that
    stopped comes back within one lock, and is then delivered again.  But a
    crashed member whose leave was lost keeps its partitions until its session
    expires, so the drain also waits for that (``DrainRule``).  ``session``:
    (seconds, source) of the share session timeout; asked of the brokers when
    None, and only if a member crashed.  One ``share-drain`` line per group says
    whether it completed in time, and what it waited for.
    """
    quiet_s = spec.consumer.share_lock_ms / 1000 + DRAIN_QUIET_MARGIN_S
    if session is None:
        session = share_session_timeout_s(bootstrap) if last_crash_at is not None else (0.0, "")
    session_s, session_source = session
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
    rule = DrainRule(
        start, start + timeout_s, quiet_s,
        crashed_members_fenced_at(last_crash_at, spec.consumer.share_lock_ms, session_s),
    )  # fmt: skip
    for w in workers:
        w.start()
    why: dict[str, str | None] = {g: "it never looked" for g in groups}
    while True:
        now = time.monotonic()
        why = {g: rule.why_incomplete(now, progress.quiet_for(g, start)) for g in groups}
        if all(w is None for w in why.values()) or now >= rule.deadline:
            break
        time.sleep(0.5)
    duration_s = round(time.monotonic() - start, 1)
    stop.set()
    for w in workers:
        w.join(COMMIT_TIMEOUT_S + CLOSE_TIMEOUT_S + 2)
    results = []
    for g in groups:
        result = ShareDrainResult(g, why[g] is None, quiet_s, progress.delivered.get(g, 0), why[g])
        history.append(
            processes.next(),
            "ok",
            "share-drain",
            {
                "group": g,
                "final": True,
                "complete": result.complete,
                "quiet_s": quiet_s,
                "sessions_expire_s": rule.sessions_expire_s(),
                "session_timeout_s": session_s if last_crash_at is not None else None,
                "session_timeout_source": session_source or None,
                "duration_s": duration_s,
                "reason": result.reason,
                "delivered": result.delivered,
            },
        )
        results.append(result)
    return results
