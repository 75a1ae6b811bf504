"""Committed offsets that went back: ``commit-regression``.

A commit that returned success must hold until a later commit replaces it.
So a read of the group's committed offsets (``committed`` lines, recorded by
members after each assignment and at the end, docs/history.md) that returns
less than a commit which succeeded before the read began is a lost commit,
unless some commit of exactly the value read could have been applied after
that one: a commit in flight at the time (it may land late), one whose
outcome is unknown, or one that never completed.  Only a commit that
certainly failed explains nothing.  That is every history last-write-wins
allows, and nothing more; no workload resets committed offsets, so a value
no commit wrote (``-1``, none at all) is never explained.

Why: KAFKA-20634 lost successful commits after a ``__consumer_offsets``
leader change, and the next owner of the partition simply re-read from the
older offset, which at-least-once delivery allows.  Only the committed
offsets show the loss.
"""

from __future__ import annotations

from kafka_chaos.checkers import sources
from kafka_chaos.checkers.check import Basis, Check
from kafka_chaos.checkers.frames import anomaly, kind
from kafka_chaos.checkers.tables import Tables
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

GTP = ["hid", "group", "topic", "partition"]


def committed_reads(t: Tables) -> DataFrame:
    """(hid, group, topic, partition, fetched, read_start, read_end, read_index):
    one row per partition of each ``committed`` read that returned."""
    lines = t.control.where(F.col("f") == "committed")
    w = Window.partitionBy("hid", "process").orderBy("index")
    paired = lines.select(
        "*", F.lag("time").over(w).alias("read_start"), F.lag("type").over(w).alias("before")
    )
    oks = paired.where((F.col("type") == "ok") & (F.col("before") == "invoke"))
    read = oks.select(
        "*", F.col("time").alias("read_end"), F.col("index").alias("read_index")
    )  # fmt: skip
    return per_partition(read, "fetched", "read_start", "read_end", "read_index")


def per_partition(lines: DataFrame, offset_as: str, *kept: str) -> DataFrame:
    """(hid, group, topic, partition, ``offset_as``, *``kept``): one row per entry of
    each line's ``offsets``."""
    o = F.explode("offsets").alias("o")
    return lines.select("hid", "group", *kept, o).select(
        "hid",
        "group",
        F.col("o.topic").alias("topic"),
        F.col("o.partition").alias("partition"),
        F.col("o.offset").alias(offset_as),
        *kept,
    )


def commit_attempts(t: Tables, groups: DataFrame) -> DataFrame:
    """(hid, group, topic, partition, committed, start, end, type, commit_index):
    every commit of ``groups`` that may have taken effect, per partition.

    ``start`` is its invoke's time (null when none was recorded: an auto
    commit's callback, a transaction's offsets), ``end`` its success's time
    (null when it may still land: outcome unknown, or no completion)."""
    lines = t.ops.where(kind("commit")).join(F.broadcast(groups), ["hid", "group"], "left_semi")
    w = Window.partitionBy("hid", "process").orderBy("index")
    seq = lines.select(
        "hid",
        "group",
        "index",
        "time",
        "type",
        "offsets",
        F.lag("type").over(w).alias("before"),
        F.lag("time").over(w).alias("before_time"),
        F.lead("type").over(w).alias("after"),
    )
    invoke = F.col("type") == "invoke"
    completed = seq.where(F.col("type").isin("ok", "info")).select(
        "*",
        F.when(F.col("before") == "invoke", F.col("before_time")).alias("start"),
        F.when(F.col("type") == "ok", F.col("time")).alias("end"),
    )
    dangling = seq.where(invoke & (F.col("after").isNull() | (F.col("after") == "invoke"))).select(
        "*", F.col("time").alias("start"), F.lit(None).cast("long").alias("end")
    )
    both = completed.unionByName(dangling).withColumnRenamed("index", "commit_index")
    return per_partition(both, "committed", "start", "end", "type", "commit_index")


def _may_follow(earlier_start: Column, read_end: Column) -> Column:
    """Attempt ``y_*`` could have been applied after a commit that began at
    ``earlier_start`` and before a read that ended at ``read_end``."""
    start, end = F.col("y_start"), F.col("y_end")
    began_in_time = start.isNull() | (start < read_end)
    not_over = end.isNull() | earlier_start.isNull() | (end > earlier_start)
    return began_in_time & not_over


def commit_regression(t: Tables) -> DataFrame:
    reads = t.keep(committed_reads(t), small=True)
    if reads.isEmpty():  # no member read its commits (older histories, transactions)
        return anomaly(reads.where(F.lit(False)), "commit-regression", F.lit(0), "group")
    attempts = commit_attempts(t, reads.select("hid", "group").distinct())
    done = attempts.where(F.col("type") == "ok").select(
        *GTP,
        "committed",
        F.col("start").alias("commit_start"),
        F.col("end").alias("commit_end"),
        "commit_index",
    )
    # A read that began after a success, and returned less than it.
    behind = reads.join(done, GTP).where(
        (F.col("commit_end") < F.col("read_start")) & (F.col("fetched") < F.col("committed"))
    )
    y = attempts.select(*(F.col(c).alias(f"y_{c}") for c in (*GTP, "committed", "start", "end")))
    explained = [F.col(c) == F.col(f"y_{c}") for c in GTP] + [
        F.col("y_committed") == F.col("fetched"),
        _may_follow(F.col("commit_start"), F.col("read_end")),
    ]
    lost = behind.join(y, explained, "left_anti")
    worst = lost.groupBy(*GTP, "fetched", "read_index").agg(
        F.max("committed").alias("committed_offset"),
        F.max_by("commit_index", F.struct("committed", "commit_index")).alias("commit_index"),
    )
    return anomaly(
        worst,
        "commit-regression",
        F.col("read_index"),
        "group",
        "topic",
        "partition",
        "committed_offset",
        "fetched",
        "commit_index",
        "read_index",
        F.array("commit_index", "read_index").alias("indices"),
    )


COMMIT_REGRESSION = Check(
    name="commit-regression",
    family="queue",
    title="Committed offset went back",
    explanation=(
        "A read of the group's committed offsets returned less than a commit that had succeeded "
        "before the read began, and no commit of the value read could have landed after it: the "
        "successful commit was lost."
    ),
    finds=(
        "a `committed` read returns an offset below an `ok` commit that completed before the "
        "read's invoke, and no commit of exactly that offset (in flight, unknown, or never "
        "completed; not failed) could be ordered between them"
    ),
    severity_doc="error",
    meaning=(
        "Kafka told a consumer its offset commit succeeded, yet later the group's committed "
        "position was lower: the commit was lost, and the group will process those records again."
    ),
    causes=(
        "A group coordinator that acknowledged a commit it had not made durable, then lost it "
        "in a leader change of `__consumer_offsets` (KAFKA-20634)."
    ),
    basis=Basis(
        promise=sources.COMMITTED_POSITION,
        source=sources.CONSUMER_SOURCE,
        url=sources.CONSUMER_JAVADOC_URL,
        allows=(
            "a lower offset that a commit in flight, of unknown outcome or never completed may "
            "have written after the acknowledged one",
        ),
    ),
)
