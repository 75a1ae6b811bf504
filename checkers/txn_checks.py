"""The transactional checks, in Spark (definitions: docs/results.md,
"Transactional checks"; twin: ``checkers.reference_txn``).

aborted-read, precommitted-read, torn-transaction and exactly-once are
filters of the cached ``Tables.per_value``, which knows of each value its
sending transaction (``txn``), that transaction's completion row
(``done_*``: its index, outcome code, partition and offset) and the input
value a consume-transform-produce send copies (``source``); only the few
candidates are joined with anything big.  The int-* checks read what ingest
already ordered: a committed transaction's consecutive acks to a partition
are paired at ingest (checkers/ack_order.py: the previous ack has the same
line index), and a transaction's reads of a partition that are not one
straight run were linked record by record at ingest (``prev_offset``,
checkers/poll_positions.py).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.op_codes import ACK, INFO
from checkers.poll_checks import skipping, suspicious
from checkers.tables import POLL, TP, Tables, anomaly, is_read, is_send, tp_columns

INT_FIELDS = ("txn", "process", "topic", "partition")


def aborted_read(t: Tables) -> DataFrame:
    """Values only an aborted transaction sent, read by a reader that promised
    committed data: every consumer under read_committed, the final drain always."""
    aborted = t.per_value.where(
        F.col("abort_index").isNotNull()
        & F.col("ack_index").isNull()
        & F.col("read_index").isNotNull()
    )
    if t.read_committed:
        seen = aborted.select("*", F.col("read_index").alias("reader_index"))
    else:
        drained = t.reads.join(F.broadcast(t.drain_processes), ["hid", "process"], "left_semi")
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


def precommitted_read(t: Tables) -> DataFrame:
    """A transaction read its own sends: a read at the index of the completion
    that sent the value (its polls and sends are rows of that one line).  Only
    values first read no later than that are candidates."""
    early = t.per_value.where(
        F.col("txn").isNotNull()
        & F.col("read_index").isNotNull()
        & (F.col("read_index") <= F.col("done_index"))
    ).select("hid", "val", "txn", "done_index")
    own = t.reads.join(F.broadcast(early), ["hid", "val"]).where(
        F.col("index") == F.col("done_index")
    )
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


def torn_transaction(t: Tables) -> DataFrame:
    """A committed transaction (or an unknown one that a read proves committed)
    partly read: some sends read, another never, although its partition was
    read past its offset."""
    done = t.per_value.where(F.col("txn").isNotNull() & F.col("done_op").isin(ACK, INFO))
    maxima = F.broadcast(
        t.partitions.select(
            "hid",
            F.col("topic").alias("done_topic"),
            F.col("partition").alias("done_partition"),
            "max_read",
        )
    )
    past = (
        done.where(F.col("read_index").isNull() & (F.col("done_offset") >= 0))
        .join(maxima, ["hid", "done_topic", "done_partition"])
        .where(F.col("max_read") > F.col("done_offset"))
    )
    suspects = F.broadcast(past.select("hid", "txn").distinct())
    read = done.where(F.col("read_index").isNotNull()).join(suspects, ["hid", "txn"], "left_semi")
    if not t.read_committed:
        # Under read_uncommitted only the final drain's reads prove an unknown
        # transaction committed (its consumers read open ones too).
        drained = t.reads.join(F.broadcast(t.drain_processes), ["hid", "process"], "left_semi")
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


def _int_fields() -> list:
    return [
        *INT_FIELDS,
        F.col("prev_offset").alias("from_offset"),
        F.col("offset").alias("to_offset"),
        "index",
    ]


def inside_sends(t: Tables) -> list[DataFrame]:
    """int-nonmonotonic-send and int-send-skip over committed transactions'
    consecutive acks to one partition (paired at ingest); a skip is over any
    known offset, whoever wrote it."""
    pairs = t.ops.where(
        is_send("ok")
        & F.col("txn").isNotNull()
        & (F.col("prev_index") == F.col("index"))
        & (F.col("offset") != F.col("prev_offset") + 1)
    ).select(*TP, "txn", "process", "index", "offset", "prev_offset")
    backwards = pairs.where(F.col("offset") <= F.col("prev_offset"))
    jumps = pairs.where(F.col("offset") > F.col("prev_offset") + 1)
    skips = skipping(jumps, t, committed=False)
    return [
        anomaly(backwards, "int-nonmonotonic-send", F.col("index"), *_int_fields()),
        anomaly(skips, "int-send-skip", F.col("index"), *_int_fields()),
    ]


def inside_polls(t: Tables) -> list[DataFrame]:
    """int-nonmonotonic-poll and int-poll-skip: a transaction's reads of one
    partition, in the order its polls returned them, except the partitions
    it lists as ``rebalanced``."""
    rebalanced = t.txn_lines.where(F.col("rebalanced").isNotNull()).select(
        "hid", "index", F.explode("rebalanced").alias("tp")
    )
    excused = rebalanced.select("hid", "index", "tp.topic", "tp.partition")
    # Each record is linked to the one before it in its transaction's reads
    # of the partition at ingest (checkers/poll_positions.py).
    pairs = (
        t.ops.where(is_read() & F.col("txn").isNotNull() & suspicious("offset", "prev_offset"))
        .select(*POLL, "offset", "prev_offset", "txn")
        .join(F.broadcast(excused), [*TP, "index"], "left_anti")
    )
    backwards = pairs.where(F.col("offset") <= F.col("prev_offset"))
    skips = skipping(pairs.where(F.col("offset") > F.col("prev_offset")), t, t.read_committed)
    return [
        anomaly(backwards, "int-nonmonotonic-poll", F.col("index"), *_int_fields()),
        anomaly(skips, "int-poll-skip", F.col("index"), *_int_fields()),
    ]


def exactly_once(t: Tables) -> DataFrame:
    """Consume-transform-produce: every input below the offsets the pipeline's
    committed transactions sent to the group appears in the output exactly
    once (read there, under read_committed: committed)."""
    commits = t.commits.where((F.col("type") == "ok") & F.col("in_txn"))
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
    frames = [aborted_read(t), precommitted_read(t), torn_transaction(t)]
    frames += inside_sends(t) + inside_polls(t)
    if ctp:
        frames.append(exactly_once(t))
    return frames
