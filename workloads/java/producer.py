"""Producer workers on Kafka's Java client: the librdkafka worker's history, through JPype.

The pacing, value routing, invoke lines, crash loop and summary are
``workloads.producer.ProducerWorker``'s; only the client differs:

* Each record is its own ``KafkaProducer.send`` with its own callback, but
  Python hands the client a whole burst in one call, and takes the
  completions back many at a time, through ``BurstSender`` (a small Java
  class, BurstSender.java): a crossing between Python and Java costs
  microseconds, so crossing per record held the client to 0.07x of Kafka's
  own perf tool.  The callbacks run on the client's I/O thread and only
  queue the completion, in Java; the worker drains and records them each
  loop turn with one write, as the librdkafka worker does after ``poll()``.
* ``send`` itself may throw (the producer failed fatally, or was closed):
  that record and the rest of its burst never reached the client's buffer,
  so they are ``fail``, and the incarnation ends; the next starts under a
  new process number.  Broker and delivery errors reach the callback and
  are judged by ``workloads.java.errors``, with librdkafka's tables.
* Shutdown is ``close(timeout)``: it waits for outstanding sends up to the
  flush bound, then fails the rest through their callbacks; what no callback
  completed is ``info``, unknown at shutdown.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kafka_chaos.harness.spec import ProducerSpec
from kafka_chaos.workloads.java import jvm
from kafka_chaos.workloads.java.errors import judge
from kafka_chaos.workloads.producer import (
    MAX_BURST,
    MAX_POLL_WAIT_S,
    MIN_POLL_WAIT_S,
    NO_ACK,
    UNKNOWN_AT_SHUTDOWN,
    Pacer,
    ProducerWorker,
    producer_config,
)
from kafka_chaos.workloads.send_lines import SendLines
from kafka_chaos.workloads.values import encode_payload, payload_template

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
        jvm.start(
            self.spec.cluster.kafka_version,
            self.history.path.parent,
            self.spec.debug,
            self.spec.client_jar,
        )
        self._fatal_reason: str | None = None

    def _incarnation(self, pacer: Pacer) -> None:
        import jpype

        self.process = self.processes.next()
        self._lines = SendLines(self.process, self.topic)
        self._completed = []
        self._fatal_reason = None
        props = jpype.JClass("java.util.Properties")()
        for k, v in java_producer_properties(
            self.spec.producer, self.bootstrap, f"{self.spec.name}-p{self.process}"
        ).items():
            props.setProperty(k, v)
        producer = jpype.JClass("org.apache.kafka.clients.producer.KafkaProducer")(props)
        sender = jpype.JClass("kafkachaos.BurstSender")(
            producer,
            jpype.JString(self.topic),
            jpype.JArray(jpype.JArray(jpype.JByte))([k for k, _ in self._routes]),
            jpype.JArray(jpype.JInt)([p for _, p in self._routes]),
        )
        drained = _Drained(MAX_BURST * 4)
        unlimited = self.rate <= 0
        try:
            while not self.stop_event.is_set() and self._fatal_reason is None:
                now = time.monotonic()
                burst = pacer.due(now, MAX_BURST)
                if unlimited:
                    burst = min(burst, UNLIMITED_MAX_OUTSTANDING - len(self._outstanding))
                if burst > 0:
                    self._send_burst_java(sender, self.values.take(burst))
                got = self._drain(sender, drained)
                if burst <= 0 and not got:
                    wait = MIN_POLL_WAIT_S if unlimited else pacer.delay(now)
                    time.sleep(min(max(wait, MIN_POLL_WAIT_S), MAX_POLL_WAIT_S))
                self._write_completed()
        finally:
            self._close(producer, sender, drained)
        if self._fatal_reason is not None:
            self._crash(self._fatal_reason)

    def _send_burst_java(self, sender: Any, values: range) -> None:
        """Record every invoke with one write, then hand the burst to the client in one call."""
        import jpype

        routes, invoke = self._routes, self._lines.invoke_format
        n_routes = len(routes)
        self.history.append_encoded([invoke % (routes[v % n_routes][0], v) for v in values])
        self.stats.invoked += len(values)
        size = self.spec.producer.message_bytes
        template, bound = payload_template(values[0], size)
        payloads = [template % v if v < bound else encode_payload(v, size) for v in values]
        ends, total = [], 0
        for payload in payloads:
            total += len(payload)
            ends.append(total)
        self._outstanding.update(values)
        sent = sender.send(
            jpype.JArray(jpype.JLong)(list(values)),
            jpype.JArray(jpype.JInt)([v % n_routes for v in values]),
            jpype.JArray(jpype.JByte)(b"".join(payloads)),
            jpype.JArray(jpype.JInt)(ends),
        )
        if sent < len(values):  # send() threw: the rest never reached the buffer
            j = judge(sender.thrown())
            for value in values[sent:]:
                self._outstanding.discard(value)
                self._complete_other("fail", value, j.name)
            self._fatal_reason = f"the Java producer refused send(): {j.name}"

    def _drain(self, sender: Any, d: _Drained) -> int:
        """Queue the completion lines of what the client finished since the last turn."""
        n = int(sender.drain(d.values, d.partitions, d.offsets, d.errors))
        if n == 0:
            return 0
        errors = d.errors[0:n] if sender.lastErrors() else [None] * n
        for value, partition, offset, error in zip(
            d.values[0:n], d.partitions[0:n], d.offsets[0:n], errors, strict=True
        ):
            self.completed(int(value), int(partition), int(offset), error)
        return n

    def completed(self, value: int, partition: int, offset: int, error: Any) -> None:
        """One send's completion line, by the librdkafka worker's rules."""
        try:
            self._outstanding.remove(value)
        except KeyError:  # completed at shutdown already
            return
        try:
            if error is not None:
                j = judge(error)
                self._complete_other(j.send_outcome(self.single_attempt), value, j.name)
            elif offset < 0 and self._acks0:  # acks=0: nothing was acknowledged
                self._complete_other("info", value, NO_ACK)
            elif offset < 0:  # acknowledged (a DUPLICATE_SEQUENCE_NUMBER answer), place unknown
                self._complete_unplaced(value, partition)
            else:
                key = self._routes[value % len(self._routes)][0]
                self._completed.append(self._lines.ok_format % (key, value, partition, offset))
                self.stats.ok += 1
        except Exception as e:
            log.exception("recording the delivery of %s failed", value)
            self._complete_other("info", value, f"recorder error: {type(e).__name__}: {e}")

    def _close(self, producer: Any, sender: Any, drained: _Drained) -> None:
        """Bounded: ``close`` waits for the flush bound, then fails what is left."""
        import jpype

        timeout = 0.0 if self._fatal_reason is not None else self.flush_timeout_s
        try:
            producer.close(jpype.JClass("java.time.Duration").ofMillis(int(timeout * 1000)))
        except jpype.JException as e:
            log.debug("producer %s close: %s", self.process, e)
        while self._drain(sender, drained):  # close() ran every callback
            self._write_completed()
        if int(sender.outOfOrder()):  # checked in Java, before Python saw anything
            log.warning(
                "producer %s: %d callback(s) ran out of offset order within a partition "
                "(BurstSender's check; java-client.log has each)",
                self.process, int(sender.outOfOrder()),
            )  # fmt: skip
        for value in sorted(self._outstanding):
            self._complete_other("info", value, UNKNOWN_AT_SHUTDOWN)
            self.stats.unknown_at_shutdown += 1
        self._outstanding.clear()
        self._write_completed()


class _Drained:
    """Java arrays a drain fills, allocated once per incarnation."""

    def __init__(self, size: int) -> None:
        import jpype

        self.values = jpype.JArray(jpype.JLong)(size)
        self.partitions = jpype.JArray(jpype.JInt)(size)
        self.offsets = jpype.JArray(jpype.JLong)(size)
        self.errors = jpype.JArray(jpype.JClass("java.lang.Exception"))(size)
