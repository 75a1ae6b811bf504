"""The transactional checks, in Spark (definitions: docs/results.md,
"Transactional checks"; twin: ``testkit.reference_txn``).

aborted-read, precommitted-read, torn-transaction and exactly-once are
filters of the cached ``Tables.per_value``, which knows of each value its
sending transaction (``txn``), that transaction's completion row
(``done_*``: its index, outcome code, partition and offset) and the input
value a consume-transform-produce send copies (``source``); only the few
candidates are joined with anything big.  The int-* checks read what ingest
already ordered: a committed transaction's consecutive acks to a partition
are paired at ingest (checkers/ingest/ack_order.py: the previous ack has the same
line index), and a transaction's reads of a partition that are not one
straight run were linked record by record at ingest (``prev_offset``,
checkers/ingest/poll_positions.py).
"""

from __future__ import annotations

from kafka_chaos.checkers import hints, sources
from kafka_chaos.checkers.check import Basis, Check, Context, Group, always
from kafka_chaos.checkers.frames import POLL, TP, anomaly, is_read, is_send, tp_columns
from kafka_chaos.checkers.ingest.op_codes import ACK, INFO
from kafka_chaos.checkers.queue.poll_checks import suspicious
from kafka_chaos.checkers.queue.queue_tables import QueueTables
from kafka_chaos.checkers.tables import Tables
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

INT_FIELDS = ("txn", "process", "topic", "partition")
TAGS = ("aborted", "early", "past")  # ``candidates``' tags: which checks a row may concern


def candidates(t: Tables) -> DataFrame:
    """The ``per_value`` rows aborted-read, precommitted-read or torn-transaction
    may report, tagged with which (``aborted``, ``early``, ``past``), kept.

    Why: each of the three filtered ``per_value`` (1e7 rows at 1e7 ops) on
    its own, torn-transaction twice, and precommitted-read then joined every
    polled record with its few candidates.  One pass makes the small table
    they all read, and a check without candidates skips its big join
    (``_or_none``).  The tags are exactly the filters each check had.
    """
    maxima = F.broadcast(
        t.partitions.select(
            "hid",
            F.col("topic").alias("done_topic"),
            F.col("partition").alias("done_partition"),
            "max_read",
        )
    )
    read = F.col("read_index").isNotNull()
    aborted = F.col("abort_index").isNotNull() & F.col("ack_index").isNull() & read
    early = F.col("txn").isNotNull() & read & (F.col("read_index") <= F.col("done_index"))
    past = (
        _done() & ~read & (F.col("done_offset") >= 0) & (F.col("max_read") > F.col("done_offset"))
    )
    tags = [F.coalesce(c, F.lit(False)).alias(n) for c, n in
            ((aborted, "aborted"), (early, "early"), (past, "past"))]  # fmt: skip
    rows = t.per_value.join(maxima, ["hid", "done_topic", "done_partition"], "left")
    tagged = rows.select(
        "hid", "val", "txn", "read_index", "abort_index", "pos_tp", "pos_offset",
        "done_index", "done_op", "done_topic", "done_partition", "done_offset", *tags,
    )  # fmt: skip
    return t.keep(tagged.where(F.col("aborted") | F.col("early") | F.col("past")))


def _done() -> Column:
    """A committed transaction's send, or an unknown one's (a read may prove it committed)."""
    return F.col("txn").isNotNull() & F.col("done_op").isin(ACK, INFO)


def _or_none(df: DataFrame, needed: bool) -> DataFrame:
    """``df``, or none of its rows (Spark then plans no scan of it at all)."""
    return df if needed else df.limit(0)


def aborted_read(t: Tables, cand: DataFrame, any_found: bool) -> DataFrame:
    """Values only an aborted transaction sent, read by a reader that promised
    committed data: every consumer under read_committed, the final drain always."""
    aborted = cand.where("aborted")
    if t.read_committed:
        seen = aborted.select("*", F.col("read_index").alias("reader_index"))
    else:
        reads = _or_none(t.reads, any_found)
        drained = reads.join(F.broadcast(t.drain_processes), ["hid", "process"], "left_semi")
        first = drained.groupBy("hid", "val").agg(F.min("index").alias("reader_index"))
        seen = aborted.join(first, ["hid", "val"])
    return anomaly(
        seen,
        "aborted-read",
        F.col("reader_index"),
        F.col("val").alias("value"),
        *tp_columns("pos_tp", "topic", "partition"),
        F.col("pos_offset").alias("offset"),
        F.col("abort_index"),
        F.col("reader_index").alias("read_index"),
        F.array("abort_index", "reader_index").alias("indices"),
    )


def precommitted_read(t: Tables, cand: DataFrame, any_found: bool) -> DataFrame:
    """A transaction read its own sends: a read at the index of the completion
    that sent the value (its polls and sends are rows of that one line).  Only
    values first read no later than that are candidates."""
    early = cand.where("early").select("hid", "val", "txn", "done_index")
    own = _or_none(t.reads, any_found).join(F.broadcast(early), ["hid", "val"])
    own = own.where(F.col("index") == F.col("done_index"))
    own = own.select("hid", "val", "txn", "index", "process", *TP[1:], "offset")
    own = own.dropDuplicates(["hid", "val", "txn"])
    return anomaly(
        own,
        "precommitted-read",
        F.col("index"),
        "txn",
        F.col("val").alias("value"),
        "process",
        "topic",
        "partition",
        "offset",
        "index",
    )


def torn_transaction(t: Tables, cand: DataFrame, any_found: bool) -> DataFrame:
    """A committed transaction (or an unknown one that a read proves committed)
    partly read: some sends read, another never, although its partition was
    read past its offset."""
    past = cand.where("past")
    suspects = F.broadcast(past.select("hid", "txn").distinct())
    done = _or_none(t.per_value, any_found).where(_done())
    read = done.where(F.col("read_index").isNotNull()).join(suspects, ["hid", "txn"], "left_semi")
    if not t.read_committed:
        # Under read_uncommitted only the final drain's reads prove an unknown
        # transaction committed (its consumers read open ones too).
        reads = _or_none(t.reads, any_found)
        drained = reads.join(F.broadcast(t.drain_processes), ["hid", "process"], "left_semi")
        proven = read.join(drained.select("hid", "val"), ["hid", "val"], "left_semi")
        read = read.where(F.col("done_op") == ACK).unionByName(proven)
    torn = past.join(F.broadcast(read.select("hid", "txn").distinct()), ["hid", "txn"])
    unread = F.struct(
        F.col("val").alias("value"),
        F.col("done_topic").alias("topic"),
        F.col("done_partition").alias("partition"),
        F.col("done_offset").alias("offset"),
    )
    by_txn = torn.groupBy("hid", "txn").agg(
        F.min("done_index").alias("index"), F.array_sort(F.collect_list(unread)).alias("u")
    )
    return anomaly(
        by_txn,
        "torn-transaction",
        F.col("index"),
        "txn",
        "index",
        F.col("u.value").alias("unread_values"),
        F.transform("u", lambda x: F.array(x["topic"], x["partition"], x["offset"])).alias(
            "positions"
        ),
    )


# _int_pairs: each int-* pair table is kept, because two checks and
# ``int_skips``' emptiness probe read it: uncached, each of the three scanned
# the history's sends or polled records (1e7 rows at 1e7 ops) again.


def _int_fields() -> list:
    return [
        *INT_FIELDS,
        F.col("prev_offset").alias("from_offset"),
        F.col("offset").alias("to_offset"),
        "index",
    ]


def inside_sends(t: Tables) -> tuple[DataFrame, DataFrame]:
    """int-send-skip's jumps (``int_skips``) and int-nonmonotonic-send's anomalies,
    over committed transactions' consecutive acks to one partition (paired at
    ingest)."""
    pairs = t.ops.where(
        is_send("ok")
        & F.col("txn").isNotNull()
        & (F.col("prev_index") == F.col("index"))
        & (F.col("offset") != F.col("prev_offset") + 1)
    ).select(*TP, "txn", "process", "index", "offset", "prev_offset")
    pairs = t.keep(pairs)  # ``_int_pairs``
    backwards = pairs.where(F.col("offset") <= F.col("prev_offset"))
    return pairs.where(F.col("offset") > F.col("prev_offset") + 1), anomaly(
        backwards, "int-nonmonotonic-send", F.col("index"), *_int_fields()
    )


def inside_polls(t: Tables) -> tuple[DataFrame, DataFrame]:
    """int-poll-skip's jumps (``int_skips``) and int-nonmonotonic-poll's
    anomalies: a transaction's reads of one partition, in the order its polls
    returned them, except the partitions it lists as ``rebalanced``."""
    rebalanced = t.txn_lines.where(F.col("rebalanced").isNotNull()).select(
        "hid", "index", F.explode("rebalanced").alias("tp")
    )
    excused = rebalanced.select("hid", "index", "tp.topic", "tp.partition")
    # Each record is linked to the one before it in its transaction's reads
    # of the partition at ingest (checkers/ingest/poll_positions.py).
    pairs = (
        t.ops.where(is_read() & F.col("txn").isNotNull() & suspicious("offset", "prev_offset"))
        .select(*POLL, "offset", "prev_offset", "txn")
        .join(F.broadcast(excused), [*TP, "index"], "left_anti")
    )
    pairs = t.keep(pairs)  # ``_int_pairs``
    backwards = pairs.where(F.col("offset") <= F.col("prev_offset"))
    return pairs.where(F.col("offset") > F.col("prev_offset")), anomaly(
        backwards, "int-nonmonotonic-poll", F.col("index"), *_int_fields()
    )


def int_skips(t: Tables, sends: DataFrame, polls: DataFrame) -> tuple[DataFrame, DataFrame]:
    """int-send-skip and int-poll-skip: the ``sends`` and ``polls`` jumps
    (``prev_offset`` -> ``offset``) over a known offset, in one join (kept).

    A send skips any known offset, whoever wrote it; a read under
    read_committed only one of ``QueueTables.committed_positions``.  Why one join:
    each check joined its jumps with ``QueueTables.next_positions`` on its own
    (``checkers.queue.poll_checks.skipping``), so that 1e7-row table was
    shuffled and sorted twice at 1e7 ops (1.8e5 send jumps, 1.8e6 read
    jumps, nearly all over a transaction marker).
    """
    cols = [*TP, "prev_offset", "offset", *INT_FIELDS[:2], "index"]
    jumps = sends.select(*cols, F.lit(True).alias("send")).unionByName(
        polls.select(*cols, F.lit(False).alias("send"))
    )
    if jumps.isEmpty():
        return sends.limit(0), polls.limit(0)
    poll_next = "next_committed" if t.read_committed else "next_any"
    known = QueueTables.of(t).next_positions.where(~F.col("marker"))
    nexts = known.select(
        *TP, F.col("offset").alias("prev_offset"), "next_any", F.col(poll_next).alias("next_poll")
    )
    next_known = F.when(F.col("send"), F.col("next_any")).otherwise(F.col("next_poll"))
    found = t.keep(jumps.join(nexts, [*TP, "prev_offset"]).where(next_known < F.col("offset")))
    return found.where("send"), found.where(~F.col("send"))


def exactly_once(t: Tables) -> DataFrame:
    """Consume-transform-produce: every input below the offsets the pipeline's
    committed transactions sent to the group appears in the output exactly
    once (read there, under read_committed: committed)."""
    commits = QueueTables.of(t).commits.where((F.col("type") == "ok") & F.col("in_txn"))
    committed = commits.groupBy(*TP).agg(F.max("committed").alias("committed"))
    inputs = (
        t.positions.where(F.col("ack") | F.col("read"))  # committed data, not mere reports
        .join(F.broadcast(committed), TP)
        .where(F.col("offset") < F.col("committed"))
        .select("hid", "val", "topic", "partition", "offset")
        .dropDuplicates(["hid", "val"])
    )
    outputs = t.per_value.where(F.col("source").isNotNull() & F.col("read_index").isNotNull())
    per_input = outputs.groupBy("hid", F.col("source").alias("val")).agg(
        F.array_sort(F.collect_list("val")).alias("outputs")
    )
    lost = inputs.join(per_input, ["hid", "val"], "left_anti").select(
        "hid", "val", F.lit("lost").alias("kind"), F.array().cast("array<long>").alias("outputs")
    )
    twice = per_input.where(F.size("outputs") > 1).select(
        "hid", "val", F.lit("duplicated").alias("kind"), "outputs"
    )
    return anomaly(
        lost.unionByName(twice),
        "exactly-once",
        F.col("val"),
        "kind",
        F.col("val").alias("value"),
        "outputs",
    )


def txn_checks(t: Tables, ctp: bool) -> list[DataFrame]:
    """Every transactional check's anomalies (exactly-once in ctp mode only)."""
    cand = candidates(t)
    # One small job says which checks have candidates at all (max of none: null).
    found = cand.agg(*(F.max(c).alias(c) for c in TAGS)).first()
    aborted, early, past = (bool(found[c]) for c in TAGS)
    frames = [
        aborted_read(t, cand, aborted),
        precommitted_read(t, cand, early),
        torn_transaction(t, cand, past),
    ]
    send_jumps, backward_sends = inside_sends(t)
    poll_jumps, backward_polls = inside_polls(t)
    send_skips, poll_skips = int_skips(t, send_jumps, poll_jumps)
    frames += [
        backward_sends,
        anomaly(send_skips, "int-send-skip", F.col("index"), *_int_fields()),
        backward_polls,
        anomaly(poll_skips, "int-poll-skip", F.col("index"), *_int_fields()),
    ]
    if ctp:
        frames.append(exactly_once(t))
    return frames


def _frames(ctx: Context) -> list[DataFrame]:
    return txn_checks(ctx.t, ctx.spec.ctp)


ABORTED_READ = Check(
    name="aborted-read",
    family="txn",
    title="Aborted read",
    explanation=(
        "A value that only an aborted transaction wrote was read by a consumer that promised "
        "committed data only (read_committed, or the final drain): Kafka exposed aborted data "
        "(G1a). Under read_uncommitted the workload's own consumers may read it legally."
    ),
    finds=(
        "(G1a) a value that only an aborted (`fail`) transaction sent, read by a committed "
        "reader (a skipped send, never written, counts too). One finding per value."
    ),
    severity_doc="error",
    meaning=(
        "A consumer that promised to return committed data only (read_committed, or the final "
        "drain) returned a message written by a transaction that was aborted. Kafka exposed data "
        "that never committed (G1a)."
    ),
    causes=(
        "An abort marker lost or placed wrongly after a coordinator failover, a delayed abort "
        "applied to a later transaction (KAFKA-17754), or a broker serving reads above the last "
        "stable offset."
    ),
    basis=Basis(
        promise=sources.READ_COMMITTED,
        source=sources.ISOLATION_SOURCE,
        url=sources.CONSUMER_CONFIG_URL,
        allows=(
            "reads of aborted records by the workload's consumers under read_uncommitted (only "
            "the final drain, which reads committed data, is held to it then)",
        ),
    ),
    hints=(hints.read_uncommitted,),
)

TORN_TRANSACTION = Check(
    name="torn-transaction",
    family="txn",
    title="Torn transaction",
    explanation=(
        "A transaction committed (an unknown outcome counts once a committed reader read one of "
        "its writes) and was partly read: some of its writes were read, yet another was never read"
        " although its partition was read past that offset, so it was not all or nothing. Each "
        "such unread write of an acknowledged (ok) transaction is also a lost-write; an unknown "
        "one's writes were never acknowledged, so this check alone reports them. A committed "
        "transaction none of whose writes was read is lost-write only, since nothing shows it half"
        " visible."
    ),
    finds=(
        "a transaction that committed (`ok`; or `info` and one of its values read by a committed "
        "reader) and was **partly read**: at least one of its sends was read, and another never "
        "was although its partition was read past that send's offset. One finding per transaction,"
        " listing the unread values and their positions. A send without a delivery report has no "
        "offset to be read past and is never one of them."
    ),
    severity_doc="error",
    meaning=(
        "A transaction committed, and some of its messages were read, but another of its messages "
        "was never read although later offsets of its partition were. Kafka promises all or "
        "nothing. (A committed transaction none of whose messages was read is a lost write "
        "instead.)"
    ),
    causes=(
        "A commit marker written to some partitions and not others, truncation of part of a "
        "transaction after a leader change, or a delayed commit landing on a later transaction "
        "(KAFKA-17754)."
    ),
    basis=Basis(
        promise=sources.ATOMIC,
        source="KafkaProducer javadoc (Kafka 4.0)",
        url=sources.PRODUCER_JAVADOC_URL,
        allows=(
            "a committed transaction none of whose sends was read (lost-write's, not torn)",
            "a send without a delivery report: it has no offset to be read past",
        ),
    ),
)

PRECOMMITTED_READ = Check(
    name="precommitted-read",
    family="txn",
    title="Read of its own uncommitted write",
    explanation=(
        "A transaction read its own writes before it committed. A read_committed consumer stops at"
        " the last stable offset, so this is an error under read_committed and legal under "
        "read_uncommitted."
    ),
    finds="a transaction's poll returned one of its own sends.",
    severity_doc=(
        "error under `read_committed`; info under `read_uncommitted` (such a consumer reads open "
        "transactions)"
    ),
    meaning=(
        "A transaction's consumer returned a message the same transaction had just written, before"
        " the transaction committed."
    ),
    causes=(
        "Expected with isolation.level=read_uncommitted; with read_committed, a broker serving "
        "data above the last stable offset."
    ),
    # A read_uncommitted consumer sees open transactions, its own included.
    severity=lambda spec: "error" if spec.read_committed else "info",
    basis=Basis(
        promise=sources.READ_COMMITTED,
        source=sources.ISOLATION_SOURCE,
        url=sources.CONSUMER_CONFIG_URL,
        allows=("a read of its own open transaction under read_uncommitted (info)",),
    ),
    hints=(hints.read_uncommitted,),
)

INT_NONMONOTONIC_POLL = Check(
    name="int-nonmonotonic-poll",
    family="txn",
    title="Non-monotonic poll inside a transaction",
    explanation=(
        "Inside one transaction, a consumer read a partition backwards (or re-read an offset) with"
        " no rebalance of that partition during the transaction."
    ),
    finds=(
        "inside one transaction, in the order its polls returned records, a partition read "
        "backwards or re-read."
    ),
    severity_doc="error",
    meaning=(
        "Within one transaction, a consumer read a partition backwards or twice, with no rebalance"
        " of that partition while the transaction ran."
    ),
    causes="A consumer seek or position reset the client did not report, or log truncation.",
    basis=Basis(
        promise=sources.ONE_LARGER,
        source=sources.CONSUMER_SOURCE,
        url=sources.CONSUMER_JAVADOC_URL,
        allows=("a partition rebalanced during the transaction (`rebalanced`)",),
    ),
)

INT_POLL_SKIP = Check(
    name="int-poll-skip",
    family="txn",
    title="Poll skip inside a transaction",
    explanation=(
        "Inside one transaction, a consumer jumped over offsets it had to return (known to hold a "
        "value and, under read_committed, not known to hold one an aborted transaction sent), with"
        " no rebalance of that partition during the transaction."
    ),
    finds=(
        "inside one transaction, two consecutive reads of a partition jump over an offset the "
        "consumer had to return (the offsets of `poll-skip`: under `read_committed` not one whose "
        "known values include an aborted one)."
    ),
    severity_doc="error",
    meaning=(
        "Within one transaction, a consumer jumped over messages of a partition it had to return, "
        "with no rebalance of that partition while the transaction ran."
    ),
    causes="A position reset past unread data, or truncation of the skipped messages.",
    basis=Basis(
        promise=sources.NEXT_RECORD,
        source=sources.CONSUMER_SOURCE,
        url=sources.CONSUMER_JAVADOC_URL,
        allows=(
            "a partition rebalanced during the transaction (`rebalanced`)",
            "a jump over transaction markers, and under read_committed over aborted records",
        ),
    ),
)

INT_NONMONOTONIC_SEND = Check(
    name="int-nonmonotonic-send",
    family="txn",
    title="Reordered writes inside a transaction",
    explanation=(
        "Two writes of one committed transaction to one partition landed out of order: the later "
        "one at a lower or equal offset."
    ),
    finds=(
        "two consecutive sends of a committed transaction to one partition, the later at a lower "
        "or equal offset."
    ),
    severity_doc="error",
    meaning=(
        "Two writes of one committed transaction to one partition landed in the opposite order to "
        "the one the producer sent them in."
    ),
    causes=(
        "Batches reordered on retry (an idempotence or sequence-number bug), or truncation between"
        " the writes."
    ),
    basis=Basis(
        promise=sources.IDEMPOTENCE,
        source=sources.IDEMPOTENCE_SOURCE + "; a transactional producer is always idempotent",
        url=sources.LIBRDKAFKA_CONFIG_URL,
        allows=("sends of aborted or unknown transactions: not acknowledged writes",),
    ),
)

INT_SEND_SKIP = Check(
    name="int-send-skip",
    family="txn",
    title="Interleaved writes inside a transaction",
    explanation=(
        "Two consecutive writes of one committed transaction to one partition are not adjacent: "
        "another producer's write (or another transaction's) landed between them. Kafka "
        "interleaves concurrent producers in a partition, so this is legal and reported for "
        "information only, as Jepsen does."
    ),
    finds=(
        "two consecutive sends of a committed transaction to one partition with a known offset "
        "between them."
    ),
    severity_doc="info",
    meaning=(
        "Other messages landed between two consecutive writes of one committed transaction to a "
        "partition. Kafka never promised adjacent offsets: this is information only."
    ),
    causes="Concurrent producers writing to the same partition, or other transactions' markers.",
    # Concurrent producers interleave in a partition: never a broken promise.
    severity=always("info"),
    basis=Basis(
        promise=sources.JEPSEN_SEND_SKIP,
        source=sources.JEPSEN_SOURCE + ": information only, Kafka reserves no offsets",
        url=sources.JEPSEN_KAFKA_URL,
        allows=("other producers' records and other transactions' markers between two sends",),
    ),
)

EXACTLY_ONCE = Check(
    name="exactly-once",
    family="txn",
    title="Exactly-once effect broken",
    explanation=(
        "Consume-transform-produce: an input below the offsets the pipeline committed never "
        "reached the output topic (lost), or reached it more than once (duplicated). Without a "
        "final drain a missing output may simply be unread yet."
    ),
    finds=(
        "(`txn.mode: ctp` only) "
        "an input below the offsets that committed transactions sent to the group (`offsets`) "
        "whose output (a send with that `source`, read from the output topic) was read never "
        "(`lost`) or more than once as different values (`duplicated`)."
    ),
    severity_doc="error; `unknown` instead of invalid without a final drain",
    meaning=(
        "In a consume-transform-produce pipeline, an input whose consumption was committed never "
        "reached the output topic (lost), or reached it more than once (duplicated)."
    ),
    causes=(
        "Offsets committed outside the transaction, a consumer not rewound after an abort "
        "(KAFKA-17582), or a zombie producer that was not fenced after a rebalance."
    ),
    needs_drain=True,
    applies=lambda spec: spec.ctp,
    basis=Basis(
        promise=sources.EXACTLY_ONCE,
        source="Kafka's design documentation, 4.6 Message Delivery Semantics (Kafka 4.0.0)",
        url=sources.DESIGN_URL,
        allows=("outputs not read yet when no final drain ran (unknown, not invalid)",),
    ),
    hints=(hints.no_rewind,),
)

TXN = Group(
    "txn",
    (
        ABORTED_READ,
        TORN_TRANSACTION,
        PRECOMMITTED_READ,
        INT_NONMONOTONIC_POLL,
        INT_POLL_SKIP,
        INT_NONMONOTONIC_SEND,
        INT_SEND_SKIP,
        EXACTLY_ONCE,
    ),
    _frames,
)
