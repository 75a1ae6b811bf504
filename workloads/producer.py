"""Producer workers: paced sends, each recorded as invoke + exactly one completion.

A worker sends asynchronously (many sends in flight per process; sends pair
by their unique ``value``).  The delivery callback only classifies and
appends one history line, and it runs inside ``producer.poll`` on the
worker's own thread, so it can never stall another worker.  Every delivery is
bounded by ``delivery.timeout.ms``; shutdown is bounded by a flush timeout
after which the remaining messages are purged and recorded as indeterminate.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from harness.errors import ConfigError
from harness.spec import ProducerSpec, TestSpec
from workloads.delivery_errors import classify, error_name
from workloads.history import HistoryWriter
from workloads.values import (
    CLIENT_LOGGER,
    Counter,
    decode_key,
    decode_payload,
    encode_payload,
    key_and_partition,
)

log = logging.getLogger(__name__)

MAX_POLL_WAIT_S = 0.05  # longest wait inside the send loop, so stop() is prompt
UNLIMITED_MAX_OUTSTANDING = 20_000  # back-pressure for rate <= 0 (benchmarks)
SOCKET_TIMEOUT_MS = 10_000
UNKNOWN_AT_SHUTDOWN = "unknown at shutdown"
NO_ACK = "NO_ACK (acks=0: sent, never acknowledged)"
ACKED_NO_OFFSET = "ACKED_WITHOUT_OFFSET (a retry found the batch already written)"


class Pacer:
    """Absolute-schedule pacing on the monotonic clock.

    Send n is due at ``start + n / rate``, so sleep overshoot never
    accumulates.  After a stall the worker may catch up, but at most
    ``max_lag_s`` worth of sends: a long stall is a shortfall to report, not
    a burst to unleash.  ``rate <= 0`` means unlimited.
    """

    def __init__(self, rate: float, max_lag_s: float = 1.0, now: float | None = None) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.max_lag_s = max_lag_s
        self.next_due = time.monotonic() if now is None else now

    def delay(self, now: float) -> float:
        """Seconds until the next send is due (0 if due now)."""
        if self.interval == 0.0:
            return 0.0
        if now - self.next_due > self.max_lag_s:
            self.next_due = now - self.max_lag_s
        return max(0.0, self.next_due - now)

    def sent(self) -> None:
        self.next_due += self.interval


def producer_config(p: ProducerSpec, bootstrap: str, client_id: str) -> dict[str, object]:
    """librdkafka settings for one worker; contradictions are a ConfigError."""
    if p.acks not in ("0", "1", "all", "-1"):
        raise ConfigError(f"producer.acks: {p.acks!r} is not one of '0', '1', 'all'")
    if p.enable_idempotence and p.acks not in ("all", "-1"):
        raise ConfigError(f"producer.enable_idempotence needs acks=all, got acks={p.acks!r}")
    if p.enable_idempotence and p.retries == 0:
        raise ConfigError("producer.enable_idempotence needs retries > 0, got retries=0")
    if p.enable_idempotence and p.max_in_flight > 5:
        raise ConfigError(
            f"producer.enable_idempotence needs max_in_flight <= 5, got {p.max_in_flight}"
        )
    if p.delivery_timeout_ms < p.request_timeout_ms + p.linger_ms:
        raise ConfigError(
            f"producer.delivery_timeout_ms ({p.delivery_timeout_ms}) must be at least "
            f"request_timeout_ms + linger_ms ({p.request_timeout_ms + p.linger_ms})"
        )
    if p.message_bytes < 1:
        raise ConfigError(f"producer.message_bytes must be positive, got {p.message_bytes}")
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "acks": p.acks,
        "enable.idempotence": p.enable_idempotence,
        "max.in.flight.requests.per.connection": p.max_in_flight,
        "linger.ms": p.linger_ms,
        "request.timeout.ms": p.request_timeout_ms,
        "delivery.timeout.ms": p.delivery_timeout_ms,
        "socket.timeout.ms": SOCKET_TIMEOUT_MS,
        "message.max.bytes": max(1_000_000, p.message_bytes * 2),
        "logger": CLIENT_LOGGER,
    }
    if p.retries is not None:
        conf["retries"] = p.retries
    return conf


def single_attempt(p: ProducerSpec) -> bool:
    """True when librdkafka never retries, making broker refusals conclusive."""
    return p.retries == 0 and not p.enable_idempotence


@dataclass
class ProducerStats:
    """Written only by the owning worker's thread; read (racily, fine) by displays."""

    invoked: int = 0
    ok: int = 0
    fail: int = 0
    info: int = 0
    unknown_at_shutdown: int = 0
    crashes: int = 0


class ProducerWorker:
    """One producer thread; a fatal producer error restarts it under a new process."""

    def __init__(
        self,
        spec: TestSpec,
        bootstrap: str,
        history: HistoryWriter,
        processes: Counter,
        values: Counter,
        rate: float,
        stop: threading.Event,
        flush_timeout_s: float,
    ) -> None:
        self.spec = spec
        self.bootstrap = bootstrap
        self.history = history
        self.processes = processes
        self.values = values
        self.rate = rate
        self.stop_event = stop
        self.flush_timeout_s = flush_timeout_s
        self.stats = ProducerStats()
        self.topic = spec.topic.name
        self.single_attempt = single_attempt(spec.producer)
        self._no_offset_reason = NO_ACK if spec.producer.acks == "0" else ACKED_NO_OFFSET
        self.process = -1
        self._fatal: KafkaError | None = None
        self._outstanding: set[int] = set()
        self.thread = threading.Thread(target=self._run, name="producer", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout: float) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()

    # -- the send loop ---------------------------------------------------

    def _run(self) -> None:
        pacer = Pacer(self.rate)
        while not self.stop_event.is_set():
            try:
                self._incarnation(pacer)
            except ValueError:  # history closed under us: the run is over
                return
            except Exception as e:  # never let one worker's bug end the run silently
                log.exception("producer worker %s failed", self.process)
                self._crash(f"{type(e).__name__}: {e}")
                self.stop_event.wait(1.0)

    def _incarnation(self, pacer: Pacer) -> None:
        self.process = self.processes.next()
        conf = producer_config(
            self.spec.producer, self.bootstrap, f"{self.spec.name}-p{self.process}"
        )
        conf["on_delivery"] = self._delivered
        conf["error_cb"] = self._client_error
        self._fatal = None
        producer = Producer(conf)
        size = self.spec.producer.message_bytes
        partitions = self.spec.topic.partitions
        unlimited = self.rate <= 0
        try:
            while not self.stop_event.is_set() and self._fatal is None:
                wait = pacer.delay(time.monotonic())
                if wait > 0:
                    producer.poll(min(wait, MAX_POLL_WAIT_S))
                    continue
                if unlimited and len(producer) >= UNLIMITED_MAX_OUTSTANDING:
                    producer.poll(0.001)
                    continue
                value = self.values.next()
                key, partition = key_and_partition(value, partitions)
                self._send(producer, value, key, partition, encode_payload(value, size))
                pacer.sent()
                producer.poll(0)
        finally:
            self._shutdown(producer)
        if self._fatal is not None:
            self._crash(f"fatal producer error {self._fatal.name()}: {self._fatal.str()}")

    def _send(
        self, producer: Producer, value: int, key: str, partition: int, payload: bytes
    ) -> None:
        op = {"topic": self.topic, "key": key, "value": value}
        self.history.append(self.process, "invoke", "send", op)
        self.stats.invoked += 1
        try:
            producer.produce(self.topic, payload, key.encode(), partition=partition)
        except BufferError:
            self._complete("fail", {**op, "error": "_QUEUE_FULL"})
            return
        except KafkaException as e:
            # produce() raised, so the message never entered the queue.
            err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
            self._complete("fail", {**op, "error": err.name() if err else str(e)})
            if err is not None and err.fatal():
                self._fatal = err
            return
        self._outstanding.add(value)

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        """Delivery report: exactly one completion line per send, never raising.

        confluent-kafka turns an exception in a callback into an opaque
        SystemError in poll(), so a recorder bug must not escape from here.
        """
        value = decode_payload(msg.value())
        op = {"topic": msg.topic(), "key": decode_key(msg.key()), "value": value}
        self._outstanding.discard(value)  # type: ignore[arg-type]
        try:
            if err is not None:
                self._complete(classify(err, self.single_attempt), {**op, "error": error_name(err)})
                return
            offset = msg.offset()
            if offset is None or offset < 0:
                # No offset, so no "ok" (the contract needs one).  With acks=0
                # the broker never answers; with acks>=1 librdkafka reports a
                # retried batch the broker had already written (duplicate
                # sequence) as delivered but without its offset.
                self._complete("info", {**op, "error": self._no_offset_reason})
                return
            self._complete("ok", {**op, "partition": msg.partition(), "offset": offset})
        except ValueError:  # the history was closed: the run is over
            raise
        except Exception as e:
            log.exception("recording the delivery of %s failed", value)
            self._complete("info", {**op, "error": f"recorder error: {type(e).__name__}: {e}"})

    def _complete(self, type_: str, value: dict[str, object]) -> None:
        self.history.append(self.process, type_, "send", value)
        setattr(self.stats, type_, getattr(self.stats, type_) + 1)

    def _client_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = err
        log.debug("producer %s: %s", self.process, err)

    def _shutdown(self, producer: Producer) -> None:
        """Bounded: flush, purge what is left, and mark the rest indeterminate."""
        timeout = 0.0 if self._fatal is not None else self.flush_timeout_s
        try:
            producer.flush(timeout)
            if len(producer):
                producer.purge(in_queue=True, in_flight=True, blocking=False)
                producer.poll(0)
        except Exception as e:  # a fatal producer may refuse flush/purge
            log.debug("producer %s shutdown: %s", self.process, e)
        for value in sorted(self._outstanding):
            key, _ = key_and_partition(value, self.spec.topic.partitions)
            op = {"topic": self.topic, "key": key, "value": value, "error": UNKNOWN_AT_SHUTDOWN}
            self._complete("info", op)
            self.stats.unknown_at_shutdown += 1
        self._outstanding.clear()

    def _crash(self, reason: str) -> None:
        self.history.append(self.process, "info", "crash", {"reason": reason})
        self.stats.crashes += 1


def split_rate(total: float, workers: int) -> list[float]:
    """Each worker's share of the target rate (<= 0 stays unlimited)."""
    if workers < 1:
        raise ConfigError(f"producer.workers must be at least 1, got {workers}")
    return [total / workers if total > 0 else 0.0] * workers
