"""Java client exceptions, judged by the rules librdkafka's errors are judged by.

A send or commit that failed through the Java client goes into the history as
``fail`` (definitely not written) or ``info`` (unknown) by the same tables as
librdkafka's (workloads/delivery_errors.py): the exception is turned into
the error code librdkafka would have reported, and that code is classified.

* An exception a broker sent is named by Kafka's own table,
  ``org.apache.kafka.common.protocol.Errors.forException``: its protocol
  code is the code librdkafka reports for the same broker error.
* An exception the client raises itself has no protocol code; ``LOCAL``
  says which librdkafka code means the same thing, and why.

Whichever of the two names a class nearer the thrown one wins (a
``BufferExhaustedException`` is a ``TimeoutException``, but it means the
local queue was full).  Anything neither knows is ``UNKNOWN``: ``info``.

The history's ``error`` is librdkafka's name for the code, then the Java
class: ``NOT_ENOUGH_REPLICAS (NotEnoughReplicasException)``, so two runs,
one per client, compare line for line, and the Java class is kept.

``python3 -m kafka_chaos.workloads.java.errors FILE`` writes the table of every listed
class as this module judges it, in a real JVM, into FILE between
``<!-- java-errors -->`` markers (docs/java-client.md); ``--check`` fails
while FILE differs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError
from kafka_chaos.harness.generated_docs import write_or_check
from kafka_chaos.workloads.delivery_errors import classify, classify_commit, error_name

UNKNOWN = KafkaError.UNKNOWN  # -1: what Errors.forException says of a class it does not know

E = "org.apache.kafka.common.errors."
# Exceptions the Java client raises itself: the librdkafka code of the same
# meaning.  The reason is the row's text in docs/java-client.md.
LOCAL: dict[str, tuple[int, str]] = {
    "org.apache.kafka.clients.producer.BufferExhaustedException": (
        KafkaError._QUEUE_FULL,
        "send() waited max.block.ms for buffer space: never enqueued",
    ),
    E + "TimeoutException": (
        KafkaError._MSG_TIMED_OUT,
        "delivery.timeout.ms (or a metadata wait) expired: queued or in flight, unknown",
    ),
    E + "SerializationException": (
        KafkaError._VALUE_SERIALIZATION,
        "serialization failed in send(): never enqueued",
    ),
    E + "TransactionAbortedException": (
        KafkaError._PURGE_QUEUE,
        "an undrained batch failed by abortTransaction; a retry of a sent batch is "
        "undrained too, so only a single attempt proves it unwritten",
    ),
    E + "InterruptException": (
        KafkaError._DESTROY,
        "the calling thread was interrupted with the record outstanding",
    ),
    "org.apache.kafka.clients.consumer.CommitFailedException": (
        KafkaError.ILLEGAL_GENERATION,
        "the group rebalanced or the member left: refused before any offset was written",
    ),
    "org.apache.kafka.clients.consumer.RetriableCommitFailedException": (
        KafkaError._TIMED_OUT,
        "a retriable commit error: the offsets may have been written",
    ),
    E + "DisconnectException": (
        KafkaError._TRANSPORT,
        "the connection broke with the request possibly delivered",
    ),
    "java.lang.IllegalStateException": (
        KafkaError._STATE,
        "the client refused the call in its current state",
    ),
}

# Listed in the docs table beside LOCAL: broker errors, by Kafka's own mapping.
BROKER_EXAMPLES = tuple(
    E + name
    for name in (
        "RecordTooLargeException",
        "RecordBatchTooLargeException",
        "CorruptRecordException",
        "InvalidTimestampException",
        "TopicAuthorizationException",
        "ClusterAuthorizationException",
        "PolicyViolationException",
        "NotEnoughReplicasException",
        "NotLeaderOrFollowerException",
        "LeaderNotAvailableException",
        "UnknownTopicOrPartitionException",
        "FencedLeaderEpochException",
        "OutOfOrderSequenceException",
        "UnknownProducerIdException",
        "InvalidProducerEpochException",
        "NotEnoughReplicasAfterAppendException",
        "NetworkException",
        "DuplicateSequenceException",
        "KafkaStorageException",
        "ProducerFencedException",
        "RebalanceInProgressException",
        "UnknownMemberIdException",
        "StaleMemberEpochException",
        "CoordinatorNotAvailableException",
        "NotCoordinatorException",
    )
) + ("org.apache.kafka.common.InvalidRecordException", "org.apache.kafka.common.KafkaException")


@dataclass(frozen=True)
class JavaError:
    """What one Java exception means, in librdkafka's terms."""

    java_class: str  # the thrown class, fully qualified
    code: int  # librdkafka's code of the same meaning
    matched: str  # the class of the chain that decided it
    source: str  # "local" (LOCAL), "broker" (Errors.forException) or "unknown"

    @property
    def name(self) -> str:
        """The history's error text: librdkafka's name, then the Java class."""
        return f"{error_name(self.code)} ({self.java_class.rsplit('.', 1)[-1]})"

    def send_outcome(self, single_attempt: bool) -> str:
        return classify(self.code, single_attempt)

    def commit_outcome(self) -> str:
        return classify_commit(self.code)


def resolve(chain: list[str], broker: tuple[str, int] | None) -> JavaError:
    """Judge a class from its chain (thrown class first, superclasses after) and
    from what ``Errors.forException`` said (the class it matched and its code,
    or None when it knows none of them)."""
    local = next((i for i, c in enumerate(chain) if c in LOCAL), None)
    remote = chain.index(broker[0]) if broker and broker[0] in chain else None
    if local is not None and (remote is None or local <= remote):
        return JavaError(chain[0], LOCAL[chain[local]][0], chain[local], "local")
    if broker is not None and remote is not None:
        return JavaError(chain[0], broker[1], broker[0], "broker")
    return JavaError(chain[0], UNKNOWN, chain[-1] if chain else "", "unknown")


def judge(exc: Any) -> JavaError:
    """Judge a Java Throwable (a JPype object); the JVM must hold Kafka's client."""
    import jpype

    errors = jpype.JClass("org.apache.kafka.common.protocol.Errors")
    chain, cls = [], exc.getClass()
    while cls is not None:
        chain.append(str(cls.getName()))
        cls = cls.getSuperclass()
    found = errors.forException(exc)
    broker = None
    if int(found.code()) != UNKNOWN:
        broker = (str(found.exception().getClass().getName()), int(found.code()))
    return resolve(chain, broker)


# -- the docs table, computed in a real JVM ------------------------------

MARK_START, MARK_END = "<!-- java-errors -->", "<!-- /java-errors -->"


def table_rows() -> list[dict[str, Any]]:
    """One row per listed class, judged by :func:`judge` on a real instance."""
    import jpype

    rows = []
    for name in (*LOCAL, *BROKER_EXAMPLES):
        cls = jpype.JClass(name)
        try:
            exc = cls(jpype.JString("from the docs table"))
        except TypeError:  # no (String) constructor
            exc = cls()
        j = judge(exc)
        rows.append(
            {
                "class": name,
                "code": error_name(j.code),
                "source": j.source,
                "send": j.send_outcome(False),
                "send_single_attempt": j.send_outcome(True),
                "commit": j.commit_outcome(),
                "why": LOCAL[j.matched][1] if j.source == "local" else "",
            }
        )
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    head = (
        "| Java exception | librdkafka code | decided by | send | send, single attempt "
        "| offset commit | why (client-side exceptions) |\n|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| `{r['class'].rsplit('.', 1)[-1]}` | `{r['code']}` | {r['source']} | {r['send']} "
        f"| {r['send_single_attempt']} | {r['commit']} | {r['why']} |\n"
        for r in rows
    )
    return head + body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, nargs="?", help="write the table into this file")
    parser.add_argument("--check", action="store_true", help="fail if FILE differs")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--kafka", default="4.4.0", help="Kafka version whose client judges")
    args = parser.parse_args(argv)
    from kafka_chaos.harness.errors import HarnessError
    from kafka_chaos.workloads.java import jvm

    try:
        jvm.start(args.kafka, Path(tempfile.gettempdir()))
    except HarnessError as e:
        print(f"kafka_chaos.workloads.java.errors: {e}", file=sys.stderr)
        return 2
    rows = table_rows()
    if args.json or args.file is None:
        print(json.dumps(rows, indent=1))
        return 0
    text = args.file.read_text()
    start, end = text.index(MARK_START) + len(MARK_START), text.index(MARK_END)
    fresh = text[:start] + "\n" + render(rows) + text[end:]
    how = f"python3 -m kafka_chaos.workloads.java.errors {args.file}"
    return write_or_check(args.file, fresh, args.check, how)


if __name__ == "__main__":
    sys.exit(main())
