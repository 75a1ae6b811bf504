"""Read and ack order: nonmonotonic-poll, poll-skip (and the pairs nonmonotonic-send uses).

A consumer process reads each partition in offset order until something
legitimately moves its position: a subscribe/assign by that process, or a
rebalance callback of that process naming the partition (assigned or revoked;
it may then resume from the committed offset).  Resets and reads are merged
into one stream per (process, partition) ordered by history index (reads of
one poll by their position in it), so "consecutive reads with no reset in
between" is simply "this row and the previous row are both reads".  A
producer's acks per partition form a stream of their own.

All streams are ordered in one window pass, and only the few suspicious
consecutive pairs are kept (cached) for the checks.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.tables import TP, Tables, anomaly, is_position

STREAM = ["hid", "process", "topic", "partition", "send"]


def _resets(t: Tables) -> DataFrame:
    """(hid, process, index, topic, partition): lines that may move a read position."""
    ops = t.control.where(~F.col("nemesis"))
    rebalances = ops.where(F.col("f") == "rebalance").select(
        "hid",
        "process",
        "index",
        F.explode(
            F.concat(F.coalesce("assigned", F.array()), F.coalesce("revoked", F.array()))
        ).alias("tp"),
    )
    named = rebalances.select("hid", "process", "index", "tp.topic", "tp.partition")
    joins = ops.where(F.col("f").isin("subscribe", "assign")).select("hid", "process", "index")
    streams = t.reads.select("hid", "process", "topic", "partition").distinct()
    everything = joins.join(streams, ["hid", "process"])
    return named.unionByName(everything.select(*named.columns))


def suspicious_pairs(t: Tables) -> DataFrame:
    """Consecutive (previous -> this) entries of a stream that may be an anomaly (cached).

    ``send`` streams: an ack at an offset not above the previous ack's.
    Read streams: two reads in a row that go backwards or jump ahead.
    """
    observed = t.ops.where(is_position()).select(
        "hid",
        "process",
        "topic",
        "partition",
        (F.col("f") == "send").alias("send"),
        "index",
        F.coalesce("j", F.lit(-1)).alias("j"),
        "offset",
        (F.col("f") == "poll").alias("is_read"),
    )
    resets = _resets(t).select(
        "hid",
        "process",
        "topic",
        "partition",
        F.lit(False).alias("send"),
        "index",
        F.lit(-1).alias("j"),
        F.lit(None).cast("long").alias("offset"),
        F.lit(False).alias("is_read"),
    )
    w = Window.partitionBy(*STREAM).orderBy("index", "j")
    stream = observed.unionByName(resets).select(
        "*",
        F.lag("is_read").over(w).alias("prev_is_read"),
        F.lag("offset").over(w).alias("prev_offset"),
        F.lag("index").over(w).alias("prev_index"),
    )
    backwards = F.col("offset") <= F.col("prev_offset")
    jump = F.col("offset") > F.col("prev_offset") + 1
    keep = (F.col("send") & backwards) | (
        F.col("is_read") & F.col("prev_is_read") & (backwards | jump)
    )
    return t.keep(stream.where(keep))


def _next_known(t: Tables) -> DataFrame:
    """(hid, topic, partition, prev_offset, next_known): the next offset known to hold a value."""
    w = Window.partitionBy(*TP).orderBy("offset")
    return t.per_position.select(
        *TP, F.col("offset").alias("prev_offset"), F.lead("offset").over(w).alias("next_known")
    )


def _fields() -> list:
    return [
        "process",
        "topic",
        "partition",
        F.col("prev_offset").alias("from_offset"),
        F.col("offset").alias("to_offset"),
        F.array_distinct(F.array("prev_index", "index")).alias("indices"),
    ]


def poll_checks(t: Tables, pairs: DataFrame) -> list[DataFrame]:
    """nonmonotonic-poll and poll-skip; ``skipped``/``skipped_count`` come from ``enrich``.

    A jump skips data when the next offset known to hold a value after where
    the consumer was lies before where it landed.  The ordered pass over every
    known offset that this needs only runs when some read jumped at all.
    """
    reads = pairs.where(~F.col("send"))
    backwards = reads.where(F.col("offset") <= F.col("prev_offset"))
    jumps = reads.where(F.col("offset") > F.col("prev_offset") + 1)
    if jumps.isEmpty():
        skips = jumps
    else:
        skips = jumps.join(_next_known(t), TP + ["prev_offset"]).where(
            F.col("next_known") < F.col("offset")
        )
    return [
        anomaly(backwards, "nonmonotonic-poll", F.col("index"), *_fields()),
        anomaly(skips, "poll-skip", F.col("index"), *_fields()),
    ]
