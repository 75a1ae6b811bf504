"""Derived tables every check family shares (acks, reads, positions, consumers).

Built once per history DataFrame as lazy Spark plans; Spark reuses the
exchanges they share when the checks run together.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

TP = ["hid", "topic", "partition"]


def to_json(*cols: Column) -> Column:
    """One example as a JSON string, so examples of every check share one column."""
    return F.to_json(F.struct(*cols))


def anomaly(df: DataFrame, check: str, sort_key: Column, *fields: Column) -> DataFrame:
    """Normalise an anomaly table to (hid, check, k, ex) for the shared collection step."""
    return df.select(
        "hid", F.lit(check).alias("check"), sort_key.alias("k"), to_json(*fields).alias("ex")
    )


@dataclass
class Tables:
    ops: DataFrame

    @cached_property
    def sends(self) -> DataFrame:
        return self.ops.where(F.col("f") == "send").select(
            "hid", "index", "time", "process", "type", "topic", "partition", "offset", "val"
        )

    @cached_property
    def acks(self) -> DataFrame:
        """Acknowledged sends (``offset`` -1 when the broker gave none, e.g. acks=0)."""
        return self.sends.where(F.col("type") == "ok").withColumn(
            "offset", F.coalesce("offset", F.lit(-1))
        )

    @cached_property
    def reads(self) -> DataFrame:
        """One row per polled record: (index, j) orders reads within a process."""
        polls = self.ops.where((F.col("f") == "poll") & (F.col("type") == "ok"))
        return polls.select(
            "hid", "index", "time", "process", "final", F.posexplode("records").alias("j", "r")
        ).select(
            "hid",
            "index",
            "j",
            "time",
            "process",
            "final",
            F.col("r.topic").alias("topic"),
            F.col("r.partition").alias("partition"),
            F.col("r.offset").alias("offset"),
            F.col("r.value").alias("val"),
        )

    @cached_property
    def positions(self) -> DataFrame:
        """Every observation of a value at an offset: acks (with offsets) and reads."""
        cols = ["hid", "topic", "partition", "offset", "val", "index"]
        acked = self.acks.where(F.col("offset") >= 0).select(*cols, F.lit(True).alias("ack"))
        read = self.reads.select(*cols, F.lit(False).alias("ack"))
        return acked.unionByName(read)

    @cached_property
    def drain_processes(self) -> DataFrame:
        """Processes of the final drain: they are not members of any group."""
        return (
            self.ops.where((F.col("f") == "poll") & F.col("final"))
            .select("hid", "process")
            .distinct()
        )

    @cached_property
    def members(self) -> DataFrame:
        """(hid, process, group, joined_index, joined_time) for group consumers."""
        joins = self.ops.where(F.col("f").isin("subscribe", "assign") & F.col("group").isNotNull())
        joins = joins.join(self.drain_processes, ["hid", "process"], "left_anti")
        return joins.groupBy("hid", "process").agg(
            F.min_by("group", "index").alias("group"),
            F.min("index").alias("joined_index"),
            F.min("time").alias("joined_time"),
        )

    @cached_property
    def horizon(self) -> DataFrame:
        """(hid, end_time, end_index): the last moment of each history."""
        return self.ops.groupBy("hid").agg(
            F.max("time").alias("end_time"), F.max("index").alias("end_index")
        )

    @cached_property
    def final_drain(self) -> DataFrame:
        """(hid, final_drain, ops) per history."""
        return self.ops.groupBy("hid").agg(
            F.max(F.col("final").cast("int")).cast("boolean").alias("final_drain"),
            F.count(F.lit(1)).alias("ops"),
        )
