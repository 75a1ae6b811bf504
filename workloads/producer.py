"""Producer workers: paced sends, each recorded as invoke + exactly one completion.

A worker sends asynchronously (many sends in flight per process; sends pair
by their unique ``value``).  The delivery callback only classifies and
queues one history line, and it runs inside ``producer.poll`` on the
worker's own thread, so it can never stall another worker; the lines it
queued are written as soon as ``poll`` returns.  Every delivery is
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
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.kafka_clients import CLIENT_LOGGER
from kafka_chaos.harness.spec import ProducerSpec, TestSpec
from kafka_chaos.workloads import client_logs
from kafka_chaos.workloads.delivery_errors import classify, error_name
from kafka_chaos.workloads.delivery_offsets import DuplicateBatchOffsets
from kafka_chaos.workloads.send_lines import SendLines
from kafka_chaos.workloads.values import (
    KEYS_PER_PARTITION,
    Counter,
    encode_payload,
    key_and_partition,
    payload_template,
)

log = logging.getLogger(__name__)

MAX_POLL_WAIT_S = 0.05  # longest wait inside the send loop, so stop() is prompt
# poll() waits in whole milliseconds, so a shorter wait would spin until the
# next send is due; sleeping 1 ms and sending what is then due (the pacer's
# schedule is absolute) keeps the rate with a fraction of the CPU.
MIN_POLL_WAIT_S = 0.001
MAX_BURST = 500  # most sends recorded with one write and produced before the next poll()
# Back-pressure for rate <= 0 (benchmarks): below librdkafka's default
# queue.buffering.max.messages (100,000), so produce() never meets a full
# queue, yet deep enough for large batches (20,000 held them to a few
# hundred messages per partition and cost about a fifth of the throughput).
UNLIMITED_MAX_OUTSTANDING = 90_000
SOCKET_TIMEOUT_MS = 10_000
UNKNOWN_AT_SHUTDOWN = "unknown at shutdown"
NO_ACK = "NO_ACK (acks=0: sent, never acknowledged)"


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

    def due(self, now: float, limit: int) -> int:
        """How many sends are due at ``now`` (at most ``limit``), counted as sent.

        Unlimited pacing always allows ``limit``; the caller bounds the
        burst by its own back-pressure.
        """
        if self.interval == 0.0:
            return limit
        n = 0
        while n < limit and self.delay(now) == 0.0:
            self.sent()
            n += 1
        return n


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
    """One producer thread; a fatal producer error restarts it under a new process.

    Recording costs at most two ``os.write`` calls per loop turn, however
    many messages the turn handles: the invokes of a send burst go out in
    one write *before* the burst is handed to librdkafka (so an invoke always
    precedes anything that could observe the message), and the completions
    that one ``poll()`` delivered go out in one write as soon as ``poll()``
    returns (so none waits in memory across a blocking call).
    """

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
        self._acks0 = spec.producer.acks == "0"  # a report without an offset acknowledges nothing
        self._positions = DuplicateBatchOffsets()
        # A value's key and partition depend only on value % len(routes).
        partitions = spec.topic.partitions
        self._routes = [
            (key.encode(), partition)
            for key, partition in (
                key_and_partition(k, partitions) for k in range(partitions * KEYS_PER_PARTITION)
            )
        ]
        self.process = -1
        self._lines = SendLines(self.process, self.topic)
        self._fatal: KafkaError | None = None
        self._outstanding: set[int] = set()
        self._completed: list[bytes] = []  # completion lines of the current poll()
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
        self._lines = SendLines(self.process, self.topic)
        self._completed = []
        conf = producer_config(
            self.spec.producer, self.bootstrap, f"{self.spec.name}-p{self.process}"
        )
        conf["on_delivery"] = self._delivered
        conf["error_cb"] = self._client_error
        conf.update(client_logs.librdkafka(self.spec, "producer", str(conf["client.id"])))
        self._fatal = None
        producer = Producer(conf)
        unlimited = self.rate <= 0
        try:
            while not self.stop_event.is_set() and self._fatal is None:
                now = time.monotonic()
                burst = pacer.due(now, MAX_BURST)
                if unlimited:
                    burst = min(burst, UNLIMITED_MAX_OUTSTANDING - len(producer))
                if burst > 0:
                    self._send_burst(producer, self.values.take(burst))
                    producer.poll(0)
                elif unlimited:
                    producer.poll(0.001)  # back-pressure: wait for deliveries
                else:
                    wait = min(max(pacer.delay(now), MIN_POLL_WAIT_S), MAX_POLL_WAIT_S)
                    producer.poll(wait)
                self._write_completed()
        finally:
            self._shutdown(producer)
        if self._fatal is not None:
            self._crash(f"fatal producer error {self._fatal.name()}: {self._fatal.str()}")

    def _send_burst(self, producer: Producer, values: range) -> None:
        """Record every invoke with one write, then hand the messages to librdkafka.

        ``produce()`` never blocks and never runs delivery callbacks, so a
        failure it raises is recorded with the next write of completions.
        """
        routes, invoke = self._routes, self._lines.invoke_format  # SendLines.invoke, inlined
        n_routes = len(routes)
        self.history.append_encoded([invoke % (routes[v % n_routes][0], v) for v in values])
        self.stats.invoked += len(values)
        topic, size, outstanding = self.topic, self.spec.producer.message_bytes, self._outstanding
        template, bound = payload_template(values[0], size)
        for value in values:
            key, partition = routes[value % n_routes]
            payload = template % value if value < bound else encode_payload(value, size)
            try:
                producer.produce(topic, payload, key, partition)
            except BufferError:
                self._complete_other("fail", value, "_QUEUE_FULL")
                continue
            except KafkaException as e:
                # produce() raised, so the message never entered the queue.
                err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
                self._complete_other("fail", value, err.name() if err else str(e))
                if err is not None and err.fatal():
                    self._fatal = err
                continue
            outstanding.add(value)

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        """Delivery report: queue exactly one completion line per send, never raising.

        It runs inside ``poll()`` on this worker's thread; the line is written
        when ``poll()`` returns.  confluent-kafka turns an exception in a
        callback into an opaque SystemError in poll(), so a recorder bug must
        not escape from here.
        """
        try:  # the payload starts with the value and a space (values.encode_payload)
            value = int(msg.value().partition(b" ")[0])
            self._outstanding.remove(value)
        except (AttributeError, ValueError, KeyError):  # not ours, or completed at shutdown
            return
        try:
            if err is not None:
                self._complete_other(classify(err, self.single_attempt), value, error_name(err))
                return
            offset = msg.offset()
            if offset is None or offset < 0 or self._positions.waiting:
                offset = self._positions.position(self.topic, msg.partition(), offset)
            if offset is None:
                if self._acks0:
                    # acks=0: the broker never answered, so nothing was acknowledged.
                    self._complete_other("info", value, NO_ACK)
                    return
                # acks>=1: the broker acknowledged it (a DUPLICATE_SEQUENCE_NUMBER
                # answer), but the report does not say where it is (delivery_offsets).
                self._complete_unplaced(value, msg.partition())
                return
            key = self._routes[value % len(self._routes)][0]  # what produce() was given
            # SendLines.ok, inlined
            self._completed.append(self._lines.ok_format % (key, value, msg.partition(), offset))
            self.stats.ok += 1
        except Exception as e:
            log.exception("recording the delivery of %s failed", value)
            self._complete_other("info", value, f"recorder error: {type(e).__name__}: {e}")

    def _complete_unplaced(self, value: int, partition: int) -> None:
        """An acknowledgement without a known offset: ``ok`` with ``offset`` null."""
        key = self._routes[value % len(self._routes)][0].decode()
        line = self._lines.other("ok", key, value, partition=partition, offset=None)
        self._completed.append(line)
        self.stats.ok += 1

    def _complete_other(self, type_: str, value: int, error: str) -> None:
        """Queue a fail/info completion; the general (orjson) path, for the rare lines."""
        key = self._routes[value % len(self._routes)][0].decode()
        self._completed.append(self._lines.other(type_, key, value, error=error))
        setattr(self.stats, type_, getattr(self.stats, type_) + 1)

    def _write_completed(self) -> None:
        """Write the completions queued since the last call, with one write."""
        if self._completed:
            lines, self._completed = self._completed, []
            self.history.append_encoded(lines)

    def _client_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = err
        log.debug("producer %s: %s", self.process, err)

    def _shutdown(self, producer: Producer) -> None:
        """Bounded: deliver, purge what is left, and mark the rest indeterminate.

        ``poll()`` in a loop rather than ``flush()``: flush may run callbacks
        and then keep waiting, and a line must not sit in memory meanwhile.
        """
        deadline = time.monotonic() + (0.0 if self._fatal is not None else self.flush_timeout_s)
        try:
            while len(producer) and (left := deadline - time.monotonic()) > 0:
                producer.poll(min(left, MAX_POLL_WAIT_S))
                self._write_completed()
            if len(producer):
                producer.purge(in_queue=True, in_flight=True, blocking=False)
                producer.poll(0)
        except ValueError:  # the history was closed
            raise
        except Exception as e:  # a fatal producer may refuse purge
            log.debug("producer %s shutdown: %s", self.process, e)
        for value in sorted(self._outstanding):
            self._complete_other("info", value, UNKNOWN_AT_SHUTDOWN)
            self.stats.unknown_at_shutdown += 1
        self._outstanding.clear()
        self._write_completed()

    def _crash(self, reason: str) -> None:
        self.history.append(self.process, "info", "crash", {"reason": reason})
        self.stats.crashes += 1


def split_rate(total: float, workers: int) -> list[float]:
    """Each worker's share of the target rate (<= 0 stays unlimited)."""
    if workers < 1:
        raise ConfigError(f"producer.workers must be at least 1, got {workers}")
    return [total / workers if total > 0 else 0.0] * workers
