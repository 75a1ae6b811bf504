"""Per-consumer read order: nonmonotonic-poll and poll-skip.

A consumer process reads each partition in offset order until something
legitimately moves its position: a subscribe/assign by that process, or a
rebalance callback of that process naming the partition (assigned or revoked;
it may then resume from the committed offset).  Resets and reads are merged
into one stream per (process, partition) ordered by history index (reads of
one poll by their position in it), so "consecutive reads with no reset in
between" is simply "this row and the previous row are both reads".
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.tables import TP, Tables, anomaly

STREAM = ["hid", "process", "topic", "partition"]


def _resets(t: Tables) -> DataFrame:
    ops = t.ops.where(~F.col("nemesis"))
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
    streams = t.reads.select(*STREAM).distinct()
    everything = joins.join(streams, ["hid", "process"])
    return named.unionByName(everything.select(*named.columns))


def read_pairs(t: Tables) -> DataFrame:
    """Consecutive reads (prev -> this) of one process and partition with no reset between."""
    reads = t.reads.select(*STREAM, "index", "j", "offset", F.lit(True).alias("is_read"))
    resets = _resets(t).select(
        *STREAM,
        "index",
        F.lit(-1).alias("j"),
        F.lit(None).cast("long").alias("offset"),
        F.lit(False).alias("is_read"),
    )
    w = Window.partitionBy(*STREAM).orderBy("index", "j")
    stream = reads.unionByName(resets).select(
        "*",
        F.lag("is_read").over(w).alias("prev_is_read"),
        F.lag("offset").over(w).alias("prev_offset"),
        F.lag("index").over(w).alias("prev_index"),
    )
    return stream.where(F.col("is_read") & F.col("prev_is_read"))


def _known_ranks(t: Tables) -> DataFrame:
    """Dense rank of every offset known to hold a value, per partition."""
    known = t.positions.select(*TP, "offset").distinct()
    w = Window.partitionBy(*TP).orderBy("offset")
    return known.withColumn("rank", F.dense_rank().over(w))


def _fields(*extra: F.Column) -> list:
    return [
        "process",
        "topic",
        "partition",
        F.col("prev_offset").alias("from_offset"),
        F.col("offset").alias("to_offset"),
        *extra,
        F.array_distinct(F.array("prev_index", "index")).alias("indices"),
    ]


def poll_checks(t: Tables) -> list[DataFrame]:
    pairs = read_pairs(t)
    backwards = pairs.where(F.col("offset") <= F.col("prev_offset"))
    jumps = pairs.where(F.col("offset") > F.col("prev_offset") + 1)
    ranks = _known_ranks(t)
    ranked = jumps.join(ranks.withColumnRenamed("rank", "r_to"), TP + ["offset"]).join(
        ranks.withColumnRenamed("offset", "prev_offset").withColumnRenamed("rank", "r_from"),
        TP + ["prev_offset"],
    )
    skips = ranked.where(F.col("r_to") - F.col("r_from") > 1)
    skipped_count = (F.col("r_to") - F.col("r_from") - 1).alias("skipped_count")
    return [
        anomaly(backwards, "nonmonotonic-poll", F.col("index"), *_fields()),
        anomaly(skips, "poll-skip", F.col("index"), *_fields(skipped_count)),
    ]
