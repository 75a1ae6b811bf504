"""Share-group members on Kafka's Java client (``KafkaShareConsumer``), through JPype.

The member's loop, its acknowledgement policy, the crash that holds records
past their lock, the share drain and every history line are
``workloads.share_consumer.ShareWorker``'s; this class swaps only the calls:
``poll(Duration)``, ``acknowledge(record, type)``, ``commitSync(Duration)``
and ``close``.  The Java ``KafkaShareConsumer`` is KIP-932's reference
implementation, with lock renewal and retried acknowledgements that
librdkafka's preview lacks, so a share-group finding seen with both clients
is the broker's, and one seen with one client is that client's.

The share drain runs on the workload's client too: its members are members
of the same groups, and what they can still be given is part of the finding.
"""

from __future__ import annotations

from typing import Any

from kafka_chaos.workloads.consumer import COMMIT_TIMEOUT_S, POLL_TIMEOUT_S
from kafka_chaos.workloads.java import jvm
from kafka_chaos.workloads.java.consumer import records_of
from kafka_chaos.workloads.java.errors import judge
from kafka_chaos.workloads.java.interop import CONSUMER, duration, properties, string_list
from kafka_chaos.workloads.share_consumer import ClientCallFailed, ShareWorker

ACK_TYPES = {"accept": "ACCEPT", "release": "RELEASE", "reject": "REJECT"}


def java_share_properties(bootstrap: str, group: str, client_id: str) -> dict[str, str]:
    """The twins of librdkafka's share settings (``share_config``): explicit
    acknowledgement, and librdkafka's socket timeout as the request bound."""
    from kafka_chaos.workloads.consumer import SOCKET_TIMEOUT_MS

    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "share.acknowledgement.mode": "explicit",
        "request.timeout.ms": str(SOCKET_TIMEOUT_MS),
        "default.api.timeout.ms": str(int(COMMIT_TIMEOUT_S * 1000)),
        "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "value.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
    }


class JavaShareWorker(ShareWorker):
    """One share-group member slot on Kafka's Java client (``consumer.client: java``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Here, in the constructor, so a bad jar stops the run before it starts.
        jvm.start(
            self.spec.cluster.kafka_version,
            self.history.path.parent,
            self.spec.debug,
            self.spec.client_jar,
        )

    def _new_consumer(self) -> Any:
        import jpype

        settings = java_share_properties(
            self.bootstrap, self.group, f"{self.spec.name}-s{self.process}"
        )
        return jpype.JClass(CONSUMER + "KafkaShareConsumer")(properties(settings))

    def _subscribe_call(self, consumer: Any) -> None:
        consumer.subscribe(string_list([self.topic]))

    def _fetch(self, consumer: Any) -> tuple[list[tuple[Any, dict[str, Any]]], list[str]]:
        import jpype

        try:
            polled = jpype.JClass("kafkachaos.Polled")(consumer.poll(duration(POLL_TIMEOUT_S)))
        except jpype.JException as e:
            raise ClientCallFailed(judge(e).name) from e
        delivered = []
        for i, record in enumerate(records_of(polled)):
            msg = polled.records.get(i)
            count = msg.deliveryCount()
            record["delivery_count"] = int(count.get()) if count.isPresent() else None
            delivered.append((msg, record))
        return delivered, []

    def _ack(self, consumer: Any, msg: Any, kind: str) -> None:
        import jpype

        ack_type = getattr(jpype.JClass(CONSUMER + "AcknowledgeType"), ACK_TYPES[kind])
        try:
            consumer.acknowledge(msg, ack_type)
        except jpype.JException as e:  # e.g. IllegalStateException: no longer in flight
            raise ClientCallFailed(f"{judge(e).name}: {e.getMessage()}") from e

    def _commit_sync(self, consumer: Any) -> list[dict[str, Any]]:
        import jpype

        try:
            result = consumer.commitSync(duration(COMMIT_TIMEOUT_S))
        except jpype.JException as e:
            raise ClientCallFailed(judge(e).name) from e
        return [
            {"topic": str(tp.topic()), "partition": int(tp.partition()),
             "error": judge(exc.get()).name}
            for tp, exc in result.items()
            if exc.isPresent()
        ]  # fmt: skip
