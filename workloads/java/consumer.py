"""Consumer-group members on Kafka's Java client: the librdkafka worker's history, through JPype.

The slot, crash loop, ownership, history lines and their judging are
``workloads.consumer.ConsumerWorker``'s; only the client differs:

* Every call is bounded by the client's own timeout argument: ``poll``,
  ``commitSync`` and ``close`` take a ``Duration``, so no call needs a
  watchdog thread (librdkafka's synchronous commit and close have none).
* A poll's records come back as parallel arrays (``Polled.java``), a few
  crossings per poll instead of five per record; Python decodes them by the
  same code as librdkafka's records.
* The rebalance listener is Python, implementing Kafka's
  ``ConsumerRebalanceListener``; the client calls it on this worker's thread,
  inside ``poll`` and ``close``, as librdkafka calls its callbacks.
* **Auto commit.** Kafka's auto-commit tells the application nothing, so its
  commits could not be recorded.  ``commit: auto`` on the Java client
  therefore commits from the worker, on the auto-commit's own schedule and
  with its own scope: ``commitAsync()`` of every consumed position each
  ``AUTO_COMMIT_INTERVAL_MS``, ``commitSync`` of the revoked partitions'
  positions before they go, and of every position before ``close``.  Their
  outcomes are ``ok`` commit lines, as librdkafka's ``on_commit`` gives.
* A poll that throws returned no records, so it is ``fail``, and the
  incarnation ends; the next starts under a new process number.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from kafka_chaos.harness.kafka_clients import CLOSE_TIMEOUT_S
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.workloads.committed import NO_OFFSET, FetchFailed
from kafka_chaos.workloads.consumer import (
    AUTO_COMMIT_INTERVAL_MS,
    COMMIT_TIMEOUT_S,
    POLL_BATCH,
    POLL_TIMEOUT_S,
    SOCKET_TIMEOUT_MS,
    ConsumerWorker,
    consumer_config,
    next_offsets,
)
from kafka_chaos.workloads.java import jvm
from kafka_chaos.workloads.java.errors import judge
from kafka_chaos.workloads.java.interop import (
    CONSUMER,
    duration,
    ints,
    offset_map,
    pairs,
    properties,
    string_list,
    topic_partition,
    topic_partitions,
)
from kafka_chaos.workloads.values import decode_key, decode_payload

log = logging.getLogger(__name__)


def java_consumer_properties(
    spec: TestSpec, bootstrap: str, group: str, client_id: str
) -> dict[str, str]:
    """The Java client's settings of the same meaning as librdkafka's (consumer_config).

    librdkafka's ``socket.timeout.ms`` is the Java ``request.timeout.ms``;
    ``default.api.timeout.ms`` bounds the calls the worker makes without a
    timeout argument of its own (the listener's ``position``).  Auto commit is
    the worker's (module docstring), so the client's own is off.
    """
    rd = consumer_config(spec, bootstrap, group, client_id)  # the same one-line errors
    membership = ("group.protocol", "session.timeout.ms", "heartbeat.interval.ms")
    props = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "enable.auto.commit": "false",
        "auto.offset.reset": "earliest",
        "max.poll.interval.ms": str(rd["max.poll.interval.ms"]),
        "max.poll.records": str(POLL_BATCH),
        "request.timeout.ms": str(SOCKET_TIMEOUT_MS),
        "default.api.timeout.ms": str(int(COMMIT_TIMEOUT_S * 1000)),
        "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "value.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
    }
    props.update({k: str(rd[k]) for k in membership if k in rd})
    return props


class JavaConsumerWorker(ConsumerWorker):
    """One consumer-group slot on Kafka's Java client (``consumer.client: java``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Here, in the constructor, so a bad jar stops the run before it starts.
        jvm.start(
            self.spec.cluster.kafka_version,
            self.history.path.parent,
            self.spec.debug,
            self.spec.client_jar,
        )
        self._consumer: Any = None
        self._leaving = False  # close() revokes: its commit was made just before

    def _incarnation(self) -> None:
        import jpype

        self._begin_incarnation()
        self._leaving = False
        settings = java_consumer_properties(
            self.spec, self.bootstrap, self.group, f"{self.spec.name}-c{self.process}"
        )
        consumer = jpype.JClass(CONSUMER + "KafkaConsumer")(properties(settings))
        self._consumer = consumer
        auto = self.spec.consumer.commit == "auto"
        next_auto_commit = time.monotonic() + AUTO_COMMIT_INTERVAL_MS / 1000
        try:
            self._join_java(consumer)
            while not self.stop_event.is_set():
                if self._crash_reason is not None:
                    self._record_crash(self._crash_reason)
                    self._leave(consumer, f"close crashed consumer {self.process}")
                    return
                records = self._poll(consumer)
                self.stats.polls += 1
                self.stats.records += len(records)
                if not auto and records:
                    self._commit_java(consumer, next_offsets(records))
                elif auto and time.monotonic() >= next_auto_commit:
                    consumer.commitAsync(_callbacks().Committed(self))
                    next_auto_commit = time.monotonic() + AUTO_COMMIT_INTERVAL_MS / 1000
                if self._to_read:
                    self._read_committed(consumer, "assigned")
            self._read_committed(consumer, "end")
        except BaseException:
            self._muted = True
            self._close(consumer, f"close failed consumer {self.process}")
            raise
        if self._leave(consumer, f"close consumer {self.process}"):
            self._left()

    def _join_java(self, consumer: Any) -> None:
        """subscribe (with the Python listener) or assign, recorded as librdkafka's are."""
        if self.spec.consumer.mode == "subscribe":
            value = self._subscribe_value()
            self.history.append(self.process, "invoke", "subscribe", value)
            consumer.subscribe(string_list(list(self.topics)), rebalance_listener(self))
            self.history.append(self.process, "ok", "subscribe", value)
            return
        parts = self._assigned_partitions()
        value = {"group": self.group, "partitions": [[self.topic, p] for p in parts]}
        self.history.append(self.process, "invoke", "assign", value)
        consumer.assign(
            topic_partitions(self.topic, parts)
        )  # positions start at the group's committed offsets
        self.history.append(self.process, "ok", "assign", value)

    def _poll(self, consumer: Any) -> list[dict[str, Any]]:
        """One recorded poll, bounded by its own timeout."""
        import jpype

        self.history.append(self.process, "invoke", "poll", None)
        try:
            polled = jpype.JClass("kafkachaos.Polled")(consumer.poll(duration(POLL_TIMEOUT_S)))
        except jpype.JException as e:
            self.history.append(self.process, "fail", "poll", {"error": judge(e).name})
            self.stats.poll_errors += 1
            raise
        records = records_of(polled)
        self.history.append(self.process, "ok", "poll", {"records": records})
        return records

    def _commit_java(self, consumer: Any, offsets: list[list[Any]]) -> None:
        """A manual commit: ``commitSync`` of the batch's next offsets, judged like librdkafka's."""
        import jpype

        value = {"group": self.group, "offsets": offsets}
        self.history.append(self.process, "invoke", "commit", value)
        try:
            consumer.commitSync(offset_map(offsets), duration(COMMIT_TIMEOUT_S))
        except jpype.JException as e:
            j = judge(e)
            self.history.append(
                self.process, j.commit_outcome(), "commit", {**value, "error": j.name}
            )
            self.stats.commits_failed += 1
            return
        self.history.append(self.process, "ok", "commit", value)
        self.stats.commits_ok += 1

    def _committed_offsets(self, consumer: Any, partitions: list[list[Any]]) -> list[list[Any]]:
        """``committed(Set, Duration)``: the group's offsets, null for none."""
        import jpype

        wanted = jpype.JClass("java.util.HashSet")()
        for t, p in partitions:
            wanted.add(topic_partition(t, p))
        try:
            got = consumer.committed(wanted, duration(COMMIT_TIMEOUT_S))
        except jpype.JException as e:
            raise FetchFailed(judge(e).name) from None
        offsets = []
        for t, p in partitions:
            meta = got.get(topic_partition(t, p))
            offsets.append([t, p, NO_OFFSET if meta is None else int(meta.offset())])
        return offsets

    def _commit_positions(self, consumer: Any, partitions: Any) -> None:
        """The auto-commit's synchronous commit of ``partitions``' positions (revoke, close)."""
        import jpype

        offsets = []
        try:
            for tp in partitions:
                pos = int(consumer.position(tp, duration(COMMIT_TIMEOUT_S)))
                offsets.append([str(tp.topic()), int(tp.partition()), pos])
            if offsets:
                consumer.commitSync(offset_map(offsets), duration(COMMIT_TIMEOUT_S))
        except jpype.JException as e:
            log.debug("consumer %s: auto commit of %s: %s", self.process, offsets, judge(e).name)
            self.stats.commits_failed += 1
            return
        self.auto_committed(offsets)

    def auto_committed(self, offsets: list[list[Any]]) -> None:
        """An auto commit that succeeded: an ``ok`` line, as librdkafka's on_commit records."""
        if self._muted or not offsets:
            return
        self.history.append(self.process, "ok", "commit", {"group": self.group, "offsets": offsets})
        self.stats.commits_ok += 1

    def _leave(self, consumer: Any, what: str) -> bool:
        """Close cleanly: the auto-commit's last commit first, then ``close``."""
        if self.spec.consumer.commit == "auto" and not self._muted:
            with contextlib.suppress(Exception):
                self._commit_positions(consumer, consumer.assignment())
        self._leaving = True
        return self._close(consumer, what)

    def _close(self, consumer: Any, what: str) -> bool:
        """``close(Duration)``: whether it returned without error, so the member left."""
        import jpype

        try:
            consumer.close(duration(CLOSE_TIMEOUT_S))
            return True
        except jpype.JException as e:
            log.debug("%s: %s", what, e)
            return False

    # -- the listener's calls, on this worker's thread inside poll() and close()

    def java_assigned(self, partitions: Any) -> None:
        self._rebalance(pairs(partitions), [])

    def java_revoked(self, partitions: Any) -> None:
        auto = self.spec.consumer.commit == "auto"
        if auto and not (self._muted or self._leaving) and self._consumer is not None:
            self._commit_positions(self._consumer, partitions)
        self._rebalance([], pairs(partitions))

    def java_lost(self, partitions: Any) -> None:
        self._rebalance([], pairs(partitions), lost=True)


def records_of(polled: Any) -> list[dict[str, Any]]:
    """A ``Polled``'s records, as the history records librdkafka's (``record_of``)."""
    n = int(polled.count)
    if n == 0:
        return []
    names = [str(t) for t in polled.topicNames]
    topics = ints(polled.topics)
    partitions = ints(polled.partitions)
    offsets = ints(polled.offsets, "q")
    key_lengths = ints(polled.keyLengths)
    value_lengths = ints(polled.valueLengths)
    keys, values = bytes(polled.keys), bytes(polled.values)
    out, k, v = [], 0, 0
    for i in range(n):
        key = value = None
        if key_lengths[i] >= 0:
            key, k = keys[k : k + key_lengths[i]], k + key_lengths[i]
        if value_lengths[i] >= 0:
            value, v = values[v : v + value_lengths[i]], v + value_lengths[i]
        out.append(
            {
                "topic": names[topics[i]],
                "partition": partitions[i],
                "offset": offsets[i],
                "key": decode_key(key),
                "value": decode_payload(value),
            }
        )
    return out


_classes: Any = None


def rebalance_listener(owner: Any) -> Any:
    """A ``ConsumerRebalanceListener`` calling ``owner.java_assigned / java_revoked /
    java_lost`` with the Java collection, on the consumer's thread."""
    return _callbacks().Listener(owner)


def _callbacks() -> Any:
    """The Python implementations of the client's callback interfaces.

    Defined on first use: JPype can implement a Java interface only once the
    JVM holding it runs.
    """
    global _classes
    if _classes is not None:
        return _classes
    from jpype import JImplements, JOverride

    @JImplements(CONSUMER + "ConsumerRebalanceListener")
    class Listener:
        def __init__(self, worker: Any) -> None:
            self.worker = worker

        @JOverride
        def onPartitionsAssigned(self, partitions: Any) -> None:  # noqa: N802 - Java's name
            self.worker.java_assigned(partitions)

        @JOverride
        def onPartitionsRevoked(self, partitions: Any) -> None:  # noqa: N802
            self.worker.java_revoked(partitions)

        @JOverride
        def onPartitionsLost(self, partitions: Any) -> None:  # noqa: N802
            self.worker.java_lost(partitions)

    @JImplements(CONSUMER + "OffsetCommitCallback")
    class Committed:
        def __init__(self, worker: JavaConsumerWorker) -> None:
            self.worker = worker

        @JOverride
        def onComplete(self, offsets: Any, exception: Any) -> None:  # noqa: N802
            if exception is not None:
                self.worker.stats.commits_failed += 1
                return
            self.worker.auto_committed(
                sorted(
                    [str(tp.topic()), int(tp.partition()), int(meta.offset())]
                    for tp, meta in offsets.items()
                )
            )

    class Classes:
        pass

    Classes.Listener, Classes.Committed = Listener, Committed  # type: ignore[attr-defined]
    _classes = Classes
    return _classes
