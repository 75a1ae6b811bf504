"""Producer workers on Kafka's Java client: the librdkafka worker's history, through JPype.

The pacing, value routing, invoke lines, crash loop and summary are
``workloads.producer.ProducerWorker``'s; only the client differs:

* ``KafkaProducer.send`` takes a callback per record.  The callback runs on
  the client's I/O thread, so it only queues the completion line (on a
  deque, which that thread and the worker share safely); the worker writes
  the queued lines with one write each loop turn, as the librdkafka worker
  does after ``poll()``.
* ``send`` itself may throw (the producer failed fatally, or was closed):
  the record never reached the client's buffer, so that send is ``fail``,
  and the incarnation ends; the next starts under a new process number.
  Broker and delivery errors reach the callback and are judged by
  ``workloads.java.errors``, with librdkafka's tables.
* Shutdown is ``close(timeout)``: it waits for outstanding sends up to the
  flush bound, then fails the rest through their callbacks; what no callback
  completed is ``info``, unknown at shutdown.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

from harness.spec import ProducerSpec
from workloads.java import jvm
from workloads.java.errors import judge
from workloads.producer import (
    MAX_BURST,
    MAX_POLL_WAIT_S,
    MIN_POLL_WAIT_S,
    UNKNOWN_AT_SHUTDOWN,
    Pacer,
    ProducerWorker,
    producer_config,
)
from workloads.send_lines import SendLines
from workloads.values import encode_payload, payload_template

log = logging.getLogger(__name__)

# send() blocks for metadata and buffer space up to max.block.ms (librdkafka's
# produce() never blocks): bounded short, so a partitioned leader cannot hold
# the worker, and a record that could not be buffered is a fail, not a wait.
MAX_BLOCK_MS = 1000
UNLIMITED_MAX_OUTSTANDING = 20_000  # rate <= 0: at most this many sends in flight


def java_producer_properties(p: ProducerSpec, bootstrap: str, client_id: str) -> dict[str, str]:
    """The Java client's settings of the same meaning as librdkafka's (producer_config).

    librdkafka's ``socket.timeout.ms`` has no Java twin: the Java client
    bounds each request by ``request.timeout.ms`` alone.
    """
    producer_config(p, bootstrap, client_id)  # the same contradictions, the same one-line errors
    props = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "acks": "all" if p.acks == "-1" else p.acks,
        "enable.idempotence": str(p.enable_idempotence).lower(),
        "max.in.flight.requests.per.connection": str(p.max_in_flight),
        "linger.ms": str(p.linger_ms),
        "request.timeout.ms": str(p.request_timeout_ms),
        "delivery.timeout.ms": str(p.delivery_timeout_ms),
        "max.request.size": str(max(1_048_576, p.message_bytes * 2)),
        "max.block.ms": str(MAX_BLOCK_MS),
        "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "value.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
    }
    if p.retries is not None:
        props["retries"] = str(p.retries)
    return props


class JavaProducerWorker(ProducerWorker):
    """One producer thread on Kafka's Java client (``producer.client: java``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Here, in the constructor, so a bad jar stops the run before it starts.
        jvm.start(self.spec.cluster.kafka_version, self.history.path.parent)
        self._completed: deque[bytes] = deque()  # type: ignore[assignment]

    def _incarnation(self, pacer: Pacer) -> None:
        import jpype

        self.process = self.processes.next()
        self._lines = SendLines(self.process, self.topic)
        props = jpype.JClass("java.util.Properties")()
        for k, v in java_producer_properties(
            self.spec.producer, self.bootstrap, f"{self.spec.name}-p{self.process}"
        ).items():
            props.setProperty(k, v)
        producer = jpype.JClass("org.apache.kafka.clients.producer.KafkaProducer")(props)
        record = jpype.JClass("org.apache.kafka.clients.producer.ProducerRecord")
        self._fatal_reason: str | None = None
        unlimited = self.rate <= 0
        try:
            while not self.stop_event.is_set() and self._fatal_reason is None:
                now = time.monotonic()
                burst = pacer.due(now, MAX_BURST)
                if unlimited:
                    burst = min(burst, UNLIMITED_MAX_OUTSTANDING - len(self._outstanding))
                if burst > 0:
                    self._send_java_burst(producer, record, self.values.take(burst))
                else:
                    wait = MIN_POLL_WAIT_S if unlimited else pacer.delay(now)
                    time.sleep(min(max(wait, MIN_POLL_WAIT_S), MAX_POLL_WAIT_S))
                self._write_completed()
        finally:
            self._close(producer)
        if self._fatal_reason is not None:
            self._crash(self._fatal_reason)

    def _send_java_burst(self, producer: Any, record: Any, values: range) -> None:
        """Record every invoke with one write, then hand the records to the client."""
        import jpype

        routes, invoke = self._routes, self._lines.invoke_format
        n_routes = len(routes)
        self.history.append_encoded([invoke % (routes[v % n_routes][0], v) for v in values])
        self.stats.invoked += len(values)
        size = self.spec.producer.message_bytes
        template, bound = payload_template(values[0], size)
        to_bytes = jpype.JArray(jpype.JByte)
        integer = jpype.JClass("java.lang.Integer")
        topic = jpype.JString(self.topic)
        for value in values:
            key, partition = routes[value % n_routes]
            payload = template % value if value < bound else encode_payload(value, size)
            if self._fatal_reason is not None:
                self._complete_other("fail", value, "PRODUCER_FAILED (not sent)")
                continue
            self._outstanding.add(value)
            try:
                producer.send(
                    record(topic, integer(partition), to_bytes(key), to_bytes(payload)),
                    _Delivery(self, value),
                )
            except jpype.JException as e:
                # Thrown, not called back: the record never entered the buffer.
                self._outstanding.discard(value)
                j = judge(e)
                self._complete_other("fail", value, j.name)
                self._fatal_reason = f"the Java producer refused send(): {j.name}: {e.getMessage()}"

    def delivered(self, value: int, metadata: Any, exception: Any) -> None:
        """Callback body, on the client's I/O thread: queue one completion line."""
        try:
            self._outstanding.remove(value)
        except KeyError:  # completed at shutdown already
            return
        try:
            if exception is not None:
                j = judge(exception)
                self._complete_other(j.send_outcome(self.single_attempt), value, j.name)
                return
            offset = int(metadata.offset()) if metadata.hasOffset() else -1
            if offset < 0:
                self._complete_other("info", value, self._no_offset_reason)
                return
            key = self._routes[value % len(self._routes)][0]
            partition = int(metadata.partition())
            self._completed.append(self._lines.ok_format % (key, value, partition, offset))
            self.stats.ok += 1
        except Exception as e:  # never into the client's I/O thread
            log.exception("recording the delivery of %s failed", value)
            self._complete_other("info", value, f"recorder error: {type(e).__name__}: {e}")

    def _write_completed(self) -> None:
        """Write what the callbacks queued, with one write; a line queued meanwhile
        waits for the next turn, never lost (popleft, not a swap of lists)."""
        lines = []
        while True:
            try:
                lines.append(self._completed.popleft())
            except IndexError:
                break
        if lines:
            self.history.append_encoded(lines)

    def _close(self, producer: Any) -> None:
        """Bounded: ``close`` waits for the flush bound, then fails what is left."""
        import jpype

        timeout = 0.0 if self._fatal_reason is not None else self.flush_timeout_s
        try:
            producer.close(jpype.JClass("java.time.Duration").ofMillis(int(timeout * 1000)))
        except jpype.JException as e:
            log.debug("producer %s close: %s", self.process, e)
        self._write_completed()
        for value in sorted(self._outstanding):
            self._outstanding.discard(value)
            self._complete_other("info", value, UNKNOWN_AT_SHUTDOWN)
            self.stats.unknown_at_shutdown += 1
        self._write_completed()


def _delivery_class() -> type:
    import jpype

    @jpype.JImplements("org.apache.kafka.clients.producer.Callback")
    class Delivery:
        def __init__(self, worker: JavaProducerWorker, value: int) -> None:
            self.worker, self.value = worker, value

        @jpype.JOverride
        def onCompletion(self, metadata: Any, exception: Any) -> None:  # noqa: N802 (Java's)
            self.worker.delivered(self.value, metadata, exception)

    return Delivery


class _LazyDelivery:
    """The Callback class, defined on first use: JImplements needs a running JVM."""

    cls: type | None = None

    def __call__(self, worker: JavaProducerWorker, value: int) -> Any:
        if _LazyDelivery.cls is None:
            _LazyDelivery.cls = _delivery_class()
        return _LazyDelivery.cls(worker, value)


_Delivery = _LazyDelivery()
