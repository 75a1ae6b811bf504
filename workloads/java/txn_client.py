"""A transactional process on Kafka's Java client: the librdkafka process's history, via JPype.

Transactions, their planning, outcomes, rewinds and history lines are
``workloads.txn_client.TxnClient``'s; this class swaps only the calls that
touch a client.  What differs, and why:

* **Transaction version.** Against a cluster that has finalized
  ``transaction.version`` 2 (Kafka 4.0+ formats new clusters so), the Java
  client 4.x commits by KIP-890 part 2: every transaction bumps the
  producer epoch, so a late request of an earlier transaction is fenced.
  librdkafka speaks the old protocol whatever the cluster has.  This is the
  control for the KAFKA-17754 class: the same schedule on both clients.
* **Errors.** Java's transactional calls fail with exceptions, judged by
  ``workloads.txn_errors.decide`` through librdkafka's codes:
  ``TimeoutException`` from a blocking transactional call (its
  ``max.block.ms`` expired) is ``_TIMED_OUT``, outcome unknown at commit, as
  librdkafka's; a plain ``KafkaException`` is the producer refusing a call in
  an error state, and the error that put it there (its cause) decides, as a
  send's delivery error would (a send that timed out: abortable).
* **Bounds.** ``max.block.ms`` is ``txn.client_timeout_s``, so
  ``initTransactions``, ``sendOffsetsToTransaction``, ``commitTransaction``
  and ``abortTransaction`` return within it; ``flush`` has no bound of its
  own and runs under ``bounded_call``.
* **Closing** drops the producer with ``close(0)``: what is open is left for
  the next incarnation's ``initTransactions`` to abort, as after a real
  crash (librdkafka's process purges and drops).
"""

from __future__ import annotations

import logging
from typing import Any

from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.kafka_clients import CLOSE_TIMEOUT_S, bounded_call
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.workloads import txn_spec
from kafka_chaos.workloads.java import jvm
from kafka_chaos.workloads.java.consumer import (
    java_consumer_properties,
    rebalance_listener,
    records_of,
)
from kafka_chaos.workloads.java.errors import judge
from kafka_chaos.workloads.java.interop import (
    duration,
    offset_map,
    pairs,
    properties,
    string_list,
    topic_partition,
    topic_partitions,
)
from kafka_chaos.workloads.txn_client import (
    SLACK_S,
    TXN_POLL_TIMEOUT_S,
    Action,
    Decision,
    TxnClient,
    _TxnError,
    producer_config,
    txn_group,
)
from kafka_chaos.workloads.txn_errors import decide
from kafka_chaos.workloads.values import encode_payload

log = logging.getLogger(__name__)

PLAIN_KAFKA_EXCEPTION = "org.apache.kafka.common.KafkaException"
TIMEOUT_EXCEPTION = "org.apache.kafka.common.errors.TimeoutException"


def java_txn_producer_properties(
    spec: TestSpec, bootstrap: str, process: int, slot: int
) -> dict[str, str]:
    """The transactional producer's settings, twins of librdkafka's (txn_client.producer_config)."""
    rd = producer_config(spec, bootstrap, process, slot)
    linger, request, delivery = rd["linger.ms"], rd["request.timeout.ms"], rd["delivery.timeout.ms"]
    if delivery < linger + request:
        raise ConfigError(
            f"the Java client needs delivery.timeout.ms ({delivery}, the smaller of "
            f"producer.delivery_timeout_ms and txn.transaction_timeout_ms) >= linger.ms + "
            f"request.timeout.ms ({linger} + {request})"
        )
    return {
        "bootstrap.servers": bootstrap,
        "client.id": rd["client.id"],
        "transactional.id": rd["transactional.id"],
        "transaction.timeout.ms": str(rd["transaction.timeout.ms"]),
        "acks": "all",
        "enable.idempotence": "true",
        "linger.ms": str(linger),
        "request.timeout.ms": str(request),
        "delivery.timeout.ms": str(delivery),
        "max.block.ms": str(int(txn_spec.of(spec).client_timeout_s * 1000)),
        "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "value.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
    }


def txn_error_code(exc: Any) -> tuple[int, str]:
    """librdkafka's code for a Java exception from a transactional call, and its name."""
    from confluent_kafka import KafkaError

    cls = str(exc.getClass().getName())
    cause = exc.getCause()
    if cls == PLAIN_KAFKA_EXCEPTION and cause is not None:
        j = judge(cause)  # the error that put the producer in its error state
        return j.code, f"{j.name} (in {cls.rsplit('.', 1)[-1]})"
    if cls == TIMEOUT_EXCEPTION:
        return KafkaError._TIMED_OUT, "_TIMED_OUT (TimeoutException)"
    j = judge(exc)
    return j.code, j.name


class JavaTxnClient(TxnClient):
    """One incarnation of a transactional process on Kafka's Java client."""

    def _create_clients(self, bootstrap: str) -> None:
        import jpype

        jvm.start(
            self.spec.cluster.kafka_version,
            self.history.path.parent,
            self.spec.debug,
            self.spec.client_jar,
        )
        producer_props = java_txn_producer_properties(self.spec, bootstrap, self.process, self.slot)
        consumer_props = java_consumer_properties(
            self.spec, bootstrap, txn_group(self.spec), f"{self.spec.name}-t{self.process}"
        )
        consumer_props["isolation.level"] = txn_spec.of(self.spec).isolation_level
        self.producer = jpype.JClass("org.apache.kafka.clients.producer.KafkaProducer")(
            properties(producer_props)
        )
        self.consumer = jpype.JClass("org.apache.kafka.clients.consumer.KafkaConsumer")(
            properties(consumer_props)
        )

    def _init_transactions(self) -> None:
        self._call(self.producer.initTransactions, "init_transactions", bounded=False)

    def _subscribe(self) -> None:
        self.consumer.subscribe(string_list([self.topic]), rebalance_listener(self))

    def _assign(self, partitions: list[int]) -> None:
        self.consumer.assign(topic_partitions(self.topic, partitions))

    def _begin(self) -> None:
        self._call(self.producer.beginTransaction, "begin_transaction", bounded=False)

    def _commit_transaction(self) -> None:
        self._call(self.producer.commitTransaction, "commit_transaction", bounded=False)

    def _abort_transaction(self) -> None:
        self._call(self.producer.abortTransaction, "abort_transaction", bounded=False)

    def _seek(self, topic: str, partition: int, offset: int) -> bool:
        import jpype

        try:
            self.consumer.seek(topic_partition(topic, partition), jpype.JLong(offset))
        except jpype.JException as e:  # not assigned any more
            log.debug("seek %s/%d: %s", topic, partition, e)
            return False
        return True

    def _decide(self, e: Exception, stage: str) -> Decision | None:
        import jpype

        if not isinstance(e, jpype.JException):
            return None
        code, name = txn_error_code(e)
        d = decide(code, stage)
        return Decision(d.action, d.outcome, name + d.why[d.why.index(":") :])

    def _send(self, m: dict[str, Any]) -> None:
        import jpype

        partition = m["partition"]
        m["partition"] = m["offset"] = None  # until its callback
        record = jpype.JClass("org.apache.kafka.clients.producer.ProducerRecord")(
            m["topic"],
            jpype.JInt(partition),
            jpype.JArray(jpype.JByte)(m["key"].encode()),
            jpype.JArray(jpype.JByte)(encode_payload(m["value"], self.spec.producer.message_bytes)),
        )
        try:
            self.producer.send(record, _txn_callbacks().Delivered(m))
        except jpype.JException as e:
            code, name = txn_error_code(e)
            m["error"] = name
            raise _TxnError(decide(code, "send")) from e

    def _poll(self, m: dict[str, Any]) -> list[dict[str, Any]]:
        import jpype

        try:
            polled = jpype.JClass("kafkachaos.Polled")(
                self.consumer.poll(duration(TXN_POLL_TIMEOUT_S))
            )
        except jpype.JException as e:
            m["records"], m["error"] = [], judge(e).name
            raise _TxnError(Decision(Action.ABORT, "fail", f"poll failed: {m['error']}")) from e
        records = records_of(polled)
        m["records"] = records
        self.stats.polls += 1
        self.stats.records += len(records)
        return records

    def _flush(self, ops: list[dict[str, Any]]) -> None:
        """Wait for every callback (bounded); a send without a result cannot commit."""
        self._call(self.producer.flush, "flush", bounded=True)
        undelivered = [m for m in ops if m["f"] == "send" and m["offset"] is None]
        failed = [m for m in undelivered if "error" in m]
        if undelivered:
            why = f"send failed: {failed[0]['error']}" if failed else "send(s) without a result"
            raise _TxnError(Decision(Action.ABORT, "fail", why))

    def _send_offsets(self, offsets: list[list[Any]]) -> None:
        metadata = self.consumer.groupMetadata()
        self._call(
            lambda: self.producer.sendOffsetsToTransaction(offset_map(offsets), metadata),
            "send_offsets_to_transaction",
            stage="offsets",
            bounded=False,
        )

    def close(self, record_revocations: bool) -> None:
        """Close the consumer within its bound; drop the producer (``close(0)``)."""
        import jpype

        self._muted = not record_revocations
        try:
            self.consumer.close(duration(CLOSE_TIMEOUT_S))
            self.ownership.closed(self._rebalance)
        except jpype.JException as e:
            log.debug("close txn consumer %s: %s", self.process, e)
        try:
            bounded_call(
                lambda: self.producer.close(duration(0)), CLOSE_TIMEOUT_S + SLACK_S, "close"
            )
        except Exception as e:
            log.debug("close txn producer %s: %s", self.process, e)

    # -- the rebalance listener's calls (workloads/java/consumer.py's Listener)

    def java_assigned(self, partitions: Any) -> None:
        self._rebalance(pairs(partitions), [])

    def java_revoked(self, partitions: Any) -> None:
        self._rebalance([], pairs(partitions))

    def java_lost(self, partitions: Any) -> None:
        self._rebalance([], pairs(partitions), lost=True)


_classes: Any = None


def _txn_callbacks() -> Any:
    """The send callback, defined once the JVM runs (JPype's rule)."""
    global _classes
    if _classes is not None:
        return _classes
    from jpype import JImplements, JOverride

    @JImplements("org.apache.kafka.clients.producer.Callback")
    class Delivered:
        """Runs on the client's I/O thread: fills in the micro-op, as librdkafka's report does."""

        def __init__(self, m: dict[str, Any]) -> None:
            self.m = m

        @JOverride
        def onCompletion(self, metadata: Any, exception: Any) -> None:  # noqa: N802
            if exception is not None:
                self.m["error"] = judge(exception).name
                return
            self.m["partition"], self.m["offset"] = (
                int(metadata.partition()),
                int(metadata.offset()),
            )

    class Classes:
        pass

    Classes.Delivered = Delivered  # type: ignore[attr-defined]
    _classes = Classes
    return _classes
