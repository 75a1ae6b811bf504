"""Checks about what was written: lost-write, unseen, duplicate, duplicate-unacked,
inconsistent-offsets, failed-write-read and nonmonotonic-send (definitions in docs/results.md).

All but nonmonotonic-send are filters of the two cached aggregations in
checkers/tables.py.  Evidence that is costly to gather for every anomaly (all
positions of a duplicate, all values at an offset) is added afterwards, only
for the examples shown (checkers/examples.py, named by each check's record).
"""

from __future__ import annotations

from kafka_chaos.checkers import examples, hints, sources
from kafka_chaos.checkers.check import Basis, Check
from kafka_chaos.checkers.frames import Branch, anomaly
from kafka_chaos.checkers.spec_view import CheckedSpec
from kafka_chaos.checkers.tables import Tables
from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def loss_severity(spec: CheckedSpec) -> str:
    """An error only where Kafka promised the acknowledged record survives a leader's
    failure (``CheckedSpec.durable``): acks=all, unclean election off.  The acks doc
    says a record acked with acks=1 "will be lost" if the leader fails before its
    followers copy it (acks=0 acknowledges nothing), and the topic config says unclean
    election "may result in data loss": there loss is an allowed shape, a warning."""
    return "error" if spec.durable else "warning"


LOSS_SEVERITY_DOC = "error with acks=all and unclean leader election off; else warning"

# What the acks and unclean-election docs allow, for every check that sees loss.
LOSS_ALLOWS = (
    "any loss with acks=0: the broker acknowledged nothing (warning)",
    f"loss with acks=1, as the acks doc says: \u201c{sources.ACKS_1}\u201d (warning)",
    "loss with unclean.leader.election.enable=true, as its doc says: "
    f"\u201c{sources.UNCLEAN}\u201d ({sources.UNCLEAN_SOURCE}, {sources.TOPIC_CONFIG_URL}) "
    "(warning)",
)


LOST_WRITE = Check(
    name="lost-write",
    family="queue",
    title="Lost write",
    explanation=(
        "The broker acknowledged these sends, yet no consumer ever read them, although later "
        "offsets of the same partition were read: the acknowledged data vanished from the log."
    ),
    finds="an acked value never read, although some read saw a higher offset of its partition",
    severity_doc=LOSS_SEVERITY_DOC,
    meaning=(
        "The broker acknowledged this message (the producer got a partition and an offset), but no"
        " consumer ever read it, while later offsets of the same partition were read. Kafka "
        "promised the data was stored and then lost it."
    ),
    causes=(
        "An unclean leader election (an out-of-sync replica became leader and truncated the log), "
        "acks=0/1 (the leader acknowledged before followers copied the message and then failed), "
        "min.insync.replicas=1 letting a lone leader acknowledge, or brokers losing unflushed "
        "page-cache data when several crash together."
    ),
    severity=loss_severity,
    enrich=examples.neighbours,
    basis=Basis(
        promise=sources.ACKS_ALL,
        source=sources.ACKS_SOURCE,
        url=sources.PRODUCER_CONFIG_URL,
        allows=LOSS_ALLOWS,
    ),
    mechanism="acknowledged, never read, while later offsets were",
    hints=(hints.loss_allowed,),
)

UNSEEN = Check(
    name="unseen",
    family="queue",
    title="Unseen acknowledged write",
    explanation=(
        "The broker acknowledged these sends but nobody read them, and nothing beyond them was "
        "read in their partition. After a final drain this means the data is gone; without one the"
        " consumers may simply not have reached it yet."
    ),
    finds=(
        "an acked value never read, nothing read beyond it in its partition; valid `false` after a"
        ' final drain, `"unknown"` without one'
    ),
    severity_doc=LOSS_SEVERITY_DOC,
    meaning=(
        "The message was acknowledged but never read, and nothing after its offset was read "
        "either, so it may be lost or the consumers may simply not have got that far."
    ),
    causes=(
        "A final drain that timed out or stopped early, consumers stuck on an unavailable "
        "partition, or a real loss at the end of the log."
    ),
    severity=loss_severity,
    needs_drain=True,
    enrich=examples.neighbours,
    basis=Basis(
        promise=sources.ACKS_ALL,
        source=sources.ACKS_SOURCE,
        url=sources.PRODUCER_CONFIG_URL,
        allows=(
            *LOSS_ALLOWS,
            "values not read yet when no final drain ran (unknown, not invalid)",
        ),
    ),
    mechanism="acknowledged, never read, and nothing after them either",
    hints=(hints.loss_allowed,),
)


def unacked_duplicate_severity(spec: CheckedSpec) -> str:
    """A copy too many of a send that was never acknowledged (it failed, or its outcome is
    unknown): what the producer promised of such a send depends on whose producer it is.

    librdkafka's guarantee is of every message ("a message is only written to the log
    once"); one that timed out in flight is "possibly persisted" and dropped from the
    queue, never sent again, so a second copy breaks it: error.  Kafka's Java producer
    promises idempotence "for messages sent within a single session" only, and after a
    send returns an error tells the application to check the last message "to ensure
    that it is not duplicated": allowed, a warning.  Without idempotence (or acks=all)
    any duplicate is legal: info.
    """
    if not spec.idempotent:
        return "info"
    return "warning" if spec.producer_client == "java" else "error"


DUPLICATE = Check(
    name="duplicate",
    family="queue",
    title="Duplicate",
    explanation=(
        "One acknowledged value sits at more than one offset, i.e. it was written twice. Legal "
        "for a non-idempotent producer that retries; a broken promise when idempotence is on. "
        "The replica verification says whether the broker's log shows its producer sending it "
        "again under a bumped epoch (a client-side retry the broker could not recognise)."
    ),
    finds=(
        "one acknowledged value at more than one (topic, partition, offset) of one cluster, from "
        "delivery reports and reads (a value whose send was never acknowledged: "
        "`duplicate-unacked`)"
    ),
    severity_doc="error with idempotence on and acks=all, else info",
    meaning=(
        "One message value appears at more than one offset: the producer's write was stored twice."
    ),
    causes=(
        "Producer retries without idempotence (enable.idempotence=false), or an idempotent "
        "producer whose session was reset (producer id expired, fatal error)."
    ),
    severity=lambda spec: "error" if spec.idempotent else "info",
    enrich=examples.duplicate_places,
    basis=Basis(
        promise=sources.IDEMPOTENCE,
        source=sources.IDEMPOTENCE_SOURCE,
        url=sources.LIBRDKAFKA_CONFIG_URL,
        allows=(
            "duplicates from a producer without idempotence, or with acks other than all (info)",
        ),
    ),
    hints=(hints.idempotence_off,),
)

DUPLICATE_UNACKED = Check(
    name="duplicate-unacked",
    family="queue",
    title="Duplicate of an unacknowledged send",
    explanation=(
        "One sent value that was never acknowledged (its send failed, its outcome is unknown, "
        "or it never completed) sits at more than one offset: it was written twice. librdkafka "
        "promises every message is written once; Kafka's Java producer promises idempotence "
        "within one session only and tells the application to check for a duplicate after a "
        "failed send, so there it is a warning."
    ),
    finds=(
        "one sent value without an acknowledgement at more than one (topic, partition, offset) "
        "of one cluster, from delivery reports and reads"
    ),
    severity_doc=(
        "with idempotence on and acks=all: error with librdkafka (`producer.client`), warning "
        "with the Java client; else info"
    ),
    meaning=(
        "A message whose send was reported failed or unknown to the producer appears at more "
        "than one offset: it was stored twice although the producer never got an answer."
    ),
    causes=(
        "A request that timed out on the client and landed late while the producer sent the "
        "same batch again under a bumped epoch, an idempotent producer whose session was "
        "reset, or producer retries without idempotence."
    ),
    severity=unacked_duplicate_severity,
    enrich=examples.duplicate_places,
    basis=Basis(
        promise=sources.LIBRDKAFKA_WRITTEN_ONCE,
        source=sources.LIBRDKAFKA_INTRO_SOURCE,
        url=sources.LIBRDKAFKA_INTRO_URL,
        allows=(
            "with Kafka's Java producer (`producer.client: java`), as its KafkaProducer javadoc "
            f"says: \u201c{sources.JAVA_ONE_SESSION}\u201d; after a send returns an error, "
            f"\u201c{sources.JAVA_CHECK_DUPLICATE}\u201d ({sources.PRODUCER_JAVADOC_URL}) "
            "(warning)",
            "duplicates from a producer without idempotence, or with acks other than all (info)",
        ),
    ),
    hints=(hints.unacked_duplicates_allowed,),
)

INCONSISTENT_OFFSETS = Check(
    name="inconsistent-offsets",
    family="queue",
    title="Inconsistent offsets",
    explanation=(
        "Two different values were seen at the same partition offset (by acks or reads): the log "
        "was rewritten, typically truncated after an unclean leader election."
    ),
    finds=(
        "one (topic, partition, offset) with two or more distinct values (delivery reports count, "
        "whatever became of the send: an aborted or unknown transaction's record still sits at its"
        " offset)"
    ),
    severity_doc=LOSS_SEVERITY_DOC,
    meaning=(
        "Different reads (or the ack and a read) disagree on which message sits at one offset. "
        "Replicas diverged: the log was rewritten after being observed."
    ),
    causes=(
        "Unclean leader election or truncation after a leader change that served data it later "
        "dropped."
    ),
    severity=loss_severity,
    enrich=examples.offset_values,
    basis=Basis(
        promise=sources.COMMITTED_ONLY,
        source="Kafka's design documentation, 4.7 Replication (Kafka 4.0.0)",
        url=sources.DESIGN_URL,
        # A lost record's offset is reused by the new leader: where loss is allowed,
        # so is another value at an offset that was acknowledged or read.
        allows=LOSS_ALLOWS,
    ),
    mechanism="acknowledged or read with one value, read with another",
    hints=(hints.loss_allowed,),
)

FAILED_WRITE_READ = Check(
    name="failed-write-read",
    family="queue",
    title="Read of a failed write",
    explanation=(
        "A send the client was told definitely failed was nevertheless read: the failure report "
        "was wrong (an aborted read, G1a)."
    ),
    finds=(
        "a value whose send definitely failed (`fail`) outside a transaction was read (an aborted "
        "transaction's sends are `aborted-read`'s)"
    ),
    severity_doc="error",
    meaning=(
        "The producer was told the write definitely failed, yet a consumer read it. Clients that "
        "retry on failure would then create duplicates or act on a phantom value."
    ),
    causes=(
        "A client library classifying an ambiguous error as definite, or a broker returning an "
        "error after appending."
    ),
    basis=Basis(
        promise=sources.NOT_PERSISTED,
        source=(
            "librdkafka's rdkafka.h, RD_KAFKA_MSG_STATUS_NOT_PERSISTED (v2.15.0): the meaning "
            "kafka-chaos gives `fail`, for error codes it judges never appended "
            "(workloads/delivery_errors.py)"
        ),
        url=sources.LIBRDKAFKA_HEADER_URL,
        allows=(
            "reads of a send whose outcome was unknown (`info`)",
            "reads of an aborted transaction's send (aborted-read judges those)",
        ),
    ),
    mechanism="reported as failed, yet read",
)

NONMONOTONIC_SEND = Check(
    name="nonmonotonic-send",
    family="queue",
    title="Non-monotonic send",
    explanation=(
        "A producer got an acknowledgement at a lower or equal offset than an earlier "
        "acknowledgement of its own in the same partition: its writes were reordered."
    ),
    finds=(
        "one producer process, same partition: an ack at a lower or equal offset than its previous"
        " ack there (two acks of one transaction are not compared: `int-nonmonotonic-send`)"
    ),
    severity_doc="error (warning without idempotence)",
    meaning=(
        "One producer's successive acknowledged sends to a partition got offsets that went "
        "backwards."
    ),
    causes=(
        "Reordering of in-flight batches on retry without idempotence (max.in.flight > 1), or log "
        "truncation between the sends."
    ),
    severity=lambda spec: "error" if spec.idempotent else "warning",
    basis=Basis(
        promise=sources.IDEMPOTENCE,
        source=sources.IDEMPOTENCE_SOURCE,
        url=sources.LIBRDKAFKA_CONFIG_URL,
        allows=("reordered acks of a producer without idempotence (warning)",),
    ),
    hints=(hints.idempotence_off,),
)


def _pair(*cols: str) -> F.Column:
    """Non-null indices, in order, as the example's ``indices``."""
    return F.array_sort(F.filter(F.array(*cols), lambda x: x.isNotNull())).alias("indices")


def unread() -> F.Column:
    """On ``Tables.per_value``: acked values no poll returned."""
    return F.col("ack_index").isNotNull() & F.col("read_index").isNull()


def sent_twice() -> F.Column:
    """On ``Tables.per_value``: values this history sent, seen at two places."""
    return F.col("dup") & F.col("invoke_index").isNotNull()


def failed_then_read() -> F.Column:
    """On ``Tables.per_value``: definitely failed sends that a poll returned."""
    return F.col("fail_index").isNotNull() & F.col("read_index").isNotNull()


def value_rows() -> F.Column:
    """On ``Tables.per_value``: the values some check of ``value_branches`` may report."""
    return unread() | sent_twice() | failed_then_read()


def value_branches() -> list[Branch]:
    """lost-write, unseen, duplicate, duplicate-unacked and failed-write-read: filters
    of ``Tables.per_value`` joined with ``Tables.partitions`` (``max_read``), which
    ``tables.anomalies`` runs in one pass with every other check of those rows."""
    return [*lost_and_unseen(), *duplicates(), failed_write_read()]


def lost_and_unseen() -> tuple[Branch, Branch]:
    """Acked values no poll returned: lost when a later offset of the partition was read.

    An ack without an offset (a committed transaction's send whose delivery
    report never came) has no place to be read past: unseen, never lost.
    """
    fields = (
        F.col("val").alias("value"),
        "topic",
        "partition",
        "offset",
        "ack_index",
        "invoke_index",
        _pair("invoke_index", "ack_index"),
    )
    lost = F.col("max_read") > F.col("offset")
    unseen = (
        F.col("max_read").isNull()
        | F.col("offset").isNull()
        | (F.col("max_read") <= F.col("offset"))
    )
    return (
        Branch("lost-write", unread() & lost, F.col("ack_index"), fields),
        Branch("unseen", unread() & unseen, F.col("ack_index"), fields),
    )


def duplicates() -> tuple[Branch, Branch]:
    """Sent values seen at two places, acknowledged (``duplicate``) and not
    (``duplicate-unacked``); ``positions``/``indices`` come from ``enrich``.

    Apart because the clients promise different things of a send they never
    acknowledged (``unacked_duplicate_severity``).  Only values this history
    sent: a value with no send is a copy another writer made (MirrorMaker's,
    keyed apart by ``checkers.ingest.topic_ids``), whose copies the mirror checks judge.
    """
    acked = F.col("ack_index").isNotNull()
    value = (F.col("val").alias("value"),)
    return (
        Branch("duplicate", sent_twice() & acked, F.col("pos_first"), value),
        Branch("duplicate-unacked", sent_twice() & ~acked, F.col("pos_first"), value),
    )


def inconsistent_offsets(t: Tables) -> DataFrame:
    """One offset with two values; ``values``/``indices`` come from ``enrich``."""
    bad = t.per_position.where(F.col("v_lo") != F.col("v_hi"))
    return anomaly(bad, "inconsistent-offsets", F.col("first"), "topic", "partition", "offset")


def failed_write_read() -> Branch:
    return Branch(
        "failed-write-read",
        failed_then_read(),
        F.col("read_index"),
        (
            F.col("val").alias("value"),
            "fail_index",
            "read_index",
            _pair("fail_index", "read_index"),
        ),
    )


def nonmonotonic_send(pairs: DataFrame) -> DataFrame:
    """Consecutive acks of one producer process to one partition whose offset did not grow."""
    bad = pairs.where(F.col("send"))  # only backwards ack pairs are kept
    return anomaly(
        bad,
        "nonmonotonic-send",
        F.col("index"),
        "process",
        "topic",
        "partition",
        F.col("prev_offset").alias("from_offset"),
        F.col("offset").alias("to_offset"),
        F.array("prev_index", "index").alias("indices"),
    )


def send_checks(t: Tables, pairs: DataFrame) -> list[DataFrame]:
    """The frames of the checks not among ``value_branches``."""
    return [inconsistent_offsets(t), nonmonotonic_send(pairs)]
