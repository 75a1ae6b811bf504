"""Checks about what was written: lost-write, unseen, duplicate, inconsistent-offsets,
failed-write-read and nonmonotonic-send (definitions in docs/results.md).

All but nonmonotonic-send are filters of the two cached aggregations in
checkers/tables.py.  Evidence that is costly to gather for every anomaly (all
positions of a duplicate, all values at an offset) is added afterwards, only
for the examples shown (checkers/api.py ``enrich``).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.tables import TP, Tables, anomaly


def _pair(*cols: str) -> F.Column:
    """Non-null indices, in order, as the example's ``indices``."""
    return F.array_sort(F.filter(F.array(*cols), lambda x: x.isNotNull())).alias("indices")


def lost_and_unseen(t: Tables) -> tuple[DataFrame, DataFrame]:
    """Acked values no poll returned: lost when a later offset of the partition was read.

    An ack without an offset (a committed transaction's send whose delivery
    report never came) has no place to be read past: unseen, never lost.
    """
    unread = t.per_value.where(F.col("ack_index").isNotNull() & F.col("read_index").isNull())
    missing = unread.join(F.broadcast(t.partitions), TP, "left")
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
    unseen = missing.where(
        F.col("max_read").isNull()
        | F.col("offset").isNull()
        | (F.col("max_read") <= F.col("offset"))
    )
    return (
        anomaly(lost, "lost-write", F.col("ack_index"), *fields),
        anomaly(unseen, "unseen", F.col("ack_index"), *fields),
    )


def duplicate(t: Tables) -> DataFrame:
    """One value seen at two places; ``positions``/``indices`` come from ``enrich``."""
    dup = t.per_value.where("dup")
    return anomaly(dup, "duplicate", F.col("pos_first"), F.col("val").alias("value"))


def inconsistent_offsets(t: Tables) -> DataFrame:
    """One offset with two values; ``values``/``indices`` come from ``enrich``."""
    bad = t.per_position.where(F.col("v_lo") != F.col("v_hi"))
    return anomaly(bad, "inconsistent-offsets", F.col("first"), "topic", "partition", "offset")


def failed_write_read(t: Tables) -> DataFrame:
    bad = t.per_value.where(F.col("fail_index").isNotNull() & F.col("read_index").isNotNull())
    return anomaly(
        bad,
        "failed-write-read",
        F.col("read_index"),
        F.col("val").alias("value"),
        "fail_index",
        "read_index",
        _pair("fail_index", "read_index"),
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
    lost, unseen = lost_and_unseen(t)
    return [
        lost,
        unseen,
        duplicate(t),
        inconsistent_offsets(t),
        failed_write_read(t),
        nonmonotonic_send(pairs),
    ]
