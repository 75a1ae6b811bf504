"""Runs of consecutive offsets among a check's anomalies: "offsets 1648-5077 of partition 0".

An unclean election truncates thousands of consecutive offsets at once, and
ten examples of offsets 1648, 1649, ... say nothing about how much is gone.
The examples results.json keeps are a sample; the ranges cover every
anomaly of the check, so they are computed in Spark over the check's whole
anomaly table, and only for checks that found more than one anomaly.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

MAX_RANGES = 20  # the largest runs per check; the rest are summed up

Ranges = dict[int, dict[str, dict[str, Any]]]


def offset_ranges(
    frames: list[DataFrame], counts: dict[int, dict[str, int]], topic_names: dict[int, str]
) -> Ranges:
    """{hid: {check: {"ranges": [{topic, partition, first, last, count}], "more_ranges": n}}}.

    ``counts``: each history's anomaly count per check; checks with at most
    one anomaly have no run to show and cost no Spark job.
    """
    wanted = sorted({c for per in counts.values() for c, n in per.items() if n > 1})
    if not wanted:
        return {}
    placed = None
    for frame in frames:
        part = frame.where(F.col("check").isin(wanted)).select(
            "hid",
            "check",
            F.get_json_object("ex", "$.topic").cast("int").alias("topic"),
            F.get_json_object("ex", "$.partition").cast("int").alias("partition"),
            F.get_json_object("ex", "$.offset").cast("long").alias("offset"),
        )
        placed = part if placed is None else placed.unionByName(part)
    placed = placed.where(
        F.col("topic").isNotNull() & F.col("partition").isNotNull() & F.col("offset").isNotNull()
    ).distinct()
    by_place = Window.partitionBy("hid", "check", "topic", "partition").orderBy("offset")
    runs = (
        placed.withColumn("run", F.col("offset") - F.row_number().over(by_place))
        .groupBy("hid", "check", "topic", "partition", "run")
        .agg(
            F.min("offset").alias("first"),
            F.max("offset").alias("last"),
            F.count(F.lit(1)).alias("n"),
        )
    )
    by_check = Window.partitionBy("hid", "check").orderBy(
        F.desc("n"), "topic", "partition", "first"
    )
    ranked = runs.select(
        "hid", "check", "topic", "partition", "first", "last", "n",
        F.row_number().over(by_check).alias("rank"),
        F.count(F.lit(1)).over(Window.partitionBy("hid", "check")).alias("runs"),
    ).where(F.col("rank") <= MAX_RANGES)  # fmt: skip
    out: Ranges = defaultdict(dict)
    for r in ranked.orderBy("hid", "check", "rank").collect():
        entry = out[r["hid"]].setdefault(r["check"], {"ranges": [], "more_ranges": 0})
        entry["ranges"].append(
            {
                "topic": topic_names.get(r["topic"], r["topic"]),
                "partition": r["partition"],
                "first": r["first"],
                "last": r["last"],
                "count": r["n"],
            }
        )
        entry["more_ranges"] = r["runs"] - len(entry["ranges"])
    return dict(out)
