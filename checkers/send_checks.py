"""Checks about what was written: lost-write, unseen, duplicate, inconsistent-offsets,
failed-write-read and nonmonotonic-send (definitions in docs/results.md).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.tables import TP, Tables, anomaly

MAX_INDICES = 20  # indices kept per example: enough to prove it, bounded for huge histories


def _indices(col: str) -> F.Column:
    return F.slice(F.sort_array(F.collect_set(col)), 1, MAX_INDICES)


def _pair(*cols: str) -> F.Column:
    """Non-null indices, in order, as the example's ``indices``."""
    return F.array_sort(F.filter(F.array(*cols), lambda x: x.isNotNull())).alias("indices")


def never_read(t: Tables) -> DataFrame:
    """Acked values no poll returned, with the highest offset read in their partition."""
    acked = t.acks.groupBy("hid", "val").agg(
        F.min_by(F.struct("index", "topic", "partition", "offset"), "index").alias("a")
    )
    acked = acked.select("hid", "val", "a.*").withColumnRenamed("index", "ack_index")
    read_vals = t.reads.where(F.col("val").isNotNull()).select("hid", "val").distinct()
    unread = acked.join(read_vals, ["hid", "val"], "left_anti")
    max_read = t.reads.groupBy(*TP).agg(F.max("offset").alias("max_read"))
    invokes = (
        t.sends.where(F.col("type") == "invoke")
        .groupBy("hid", "val")
        .agg(F.min("index").alias("invoke_index"))
    )
    return unread.join(max_read, TP, "left").join(invokes, ["hid", "val"], "left")


def lost_and_unseen(t: Tables) -> tuple[DataFrame, DataFrame]:
    missing = never_read(t)
    fields = [
        F.col("val").alias("value"),
        "topic",
        "partition",
        "offset",
        "ack_index",
        "invoke_index",
        _pair("invoke_index", "ack_index"),
    ]
    lost = missing.where(F.col("max_read") > F.col("offset"))
    unseen = missing.where(F.col("max_read").isNull() | (F.col("max_read") <= F.col("offset")))
    return (
        anomaly(lost, "lost-write", F.col("ack_index"), *fields),
        anomaly(unseen, "unseen", F.col("ack_index"), *fields),
    )


def duplicate(t: Tables) -> DataFrame:
    pos = t.positions.where(F.col("val").isNotNull())
    per_value = pos.groupBy("hid", "val").agg(
        F.array_sort(F.collect_set(F.struct("topic", "partition", "offset"))).alias("positions"),
        _indices("index").alias("indices"),
        F.min("index").alias("first"),
    )
    dup = per_value.where(F.size("positions") > 1)
    return anomaly(
        dup, "duplicate", F.col("first"), F.col("val").alias("value"), "positions", "indices"
    )


def inconsistent_offsets(t: Tables) -> DataFrame:
    pos = t.positions.where(F.col("val").isNotNull())
    per_offset = pos.groupBy(*TP, "offset").agg(
        F.array_sort(F.collect_set("val")).alias("values"),
        _indices("index").alias("indices"),
        F.min("index").alias("first"),
    )
    bad = per_offset.where(F.size("values") > 1)
    return anomaly(
        bad,
        "inconsistent-offsets",
        F.col("first"),
        "topic",
        "partition",
        "offset",
        "values",
        "indices",
    )


def failed_write_read(t: Tables) -> DataFrame:
    fails = (
        t.sends.where(F.col("type") == "fail")
        .groupBy("hid", "val")
        .agg(F.min("index").alias("fail_index"))
    )
    reads = t.reads.groupBy("hid", "val").agg(F.min("index").alias("read_index"))
    bad = fails.join(reads, ["hid", "val"])
    return anomaly(
        bad,
        "failed-write-read",
        F.col("read_index"),
        F.col("val").alias("value"),
        "fail_index",
        "read_index",
        _pair("fail_index", "read_index"),
    )


def nonmonotonic_send(t: Tables) -> DataFrame:
    """Consecutive acks of one producer process to one partition whose offset did not grow."""
    w = Window.partitionBy("hid", "process", "topic", "partition").orderBy("index")
    acks = t.acks.where(F.col("offset") >= 0).select(
        "hid",
        "process",
        "topic",
        "partition",
        "offset",
        "index",
        F.lag("offset").over(w).alias("prev_offset"),
        F.lag("index").over(w).alias("prev_index"),
    )
    bad = acks.where(F.col("offset") <= F.col("prev_offset"))
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


def send_checks(t: Tables) -> list[DataFrame]:
    lost, unseen = lost_and_unseen(t)
    return [
        lost,
        unseen,
        duplicate(t),
        inconsistent_offsets(t),
        failed_write_read(t),
        nonmonotonic_send(t),
    ]
