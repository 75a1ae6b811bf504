"""Availability statistics: throughput timeline, longest ack gap, rates during faults.

Everything heavy (latency percentiles, per-second counts, gaps between acks)
is aggregated in Spark; only per-second rows and the fault list reach the
driver.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checkers.op_codes import ACK, FAIL, INFO, INVOKE, READ
from checkers.tables import Tables, is_read, is_send, op_is

NS = 1e9


def _second() -> F.Column:
    """Whole second of the test a line falls in (columns need a live session)."""
    return F.floor(F.col("time") / F.lit(NS)).cast("long")


def ack_times(t: Tables) -> DataFrame:
    """(time) of every acked send, from the cached per-value table."""
    return t.per_value.where(F.col("ack_index").isNotNull()).select(F.col("ack_time").alias("time"))


def timeline(t: Tables) -> list[dict[str, Any]]:
    """Per second: sends acked/failed/indeterminate, records polled, ack latency.

    Counts come straight from the rows; latency (invoke -> ack) from the
    cached per-value table, so no join of sends to their invokes is needed.
    """
    counted = t.ops.where((is_send() & (F.col("op") != INVOKE)) | is_read())
    counted = counted.select(_second().alias("t"), "op")
    counts = counted.groupBy("t").agg(
        F.count(F.when(op_is(ACK), 1)).alias("acked"),
        F.count(F.when(op_is(FAIL), 1)).alias("failed"),
        F.count(F.when(op_is(INFO), 1)).alias("info"),
        F.count(F.when(op_is(READ), 1)).alias("polled"),
    )
    acked = t.per_value.where(F.col("ack_index").isNotNull() & F.col("invoke_index").isNotNull())
    latency = (
        acked.select(
            F.floor(F.col("ack_time") / F.lit(NS)).cast("long").alias("t"),
            ((F.col("ack_time") - F.col("invoke_time")) / 1e6).alias("lat"),
        )
        .groupBy("t")
        .agg(
            F.percentile_approx("lat", [0.5, 0.99]).alias("p"),
            F.max("lat").alias("lat_max_ms"),
        )
    )
    rows = counts.join(latency, "t", "full").orderBy("t").collect()
    out = []
    for r in rows:
        p = r["p"] or [None, None]
        out.append(
            {
                "t": r["t"],
                "acked": r["acked"] or 0,
                "failed": r["failed"] or 0,
                "info": r["info"] or 0,
                "polled": int(r["polled"] or 0),
                "lat_p50_ms": p[0],
                "lat_p99_ms": p[1],
                "lat_max_ms": r["lat_max_ms"],
            }
        )
    return out


def longest_gap(t: Tables, start: int, end: int) -> tuple[float, float]:
    """Longest window in [start, end] ns with no acked send: (length_s, start_s).

    Gaps inside one second come from a window per second; gaps across seconds
    from each second's first and last ack, joined on the driver.
    """
    acks = ack_times(t).select("time", _second().alias("t"))
    w = Window.partitionBy("t").orderBy("time")
    within = acks.select("t", "time", (F.col("time") - F.lag("time").over(w)).alias("gap"))
    per_second = (
        within.groupBy("t")
        .agg(
            F.min("time").alias("lo"),
            F.max("time").alias("hi"),
            F.max_by(F.struct("gap", "time"), "gap").alias("g"),
        )
        .orderBy("t")
        .collect()
    )
    best = (0.0, start)
    previous = start
    for r in per_second:
        candidates = [(r["lo"] - previous, previous)]
        if r["g"] is not None and r["g"]["gap"] is not None:
            candidates.append((r["g"]["gap"], r["g"]["time"] - r["g"]["gap"]))
        for gap, at in candidates:
            if gap > best[0]:
                best = (gap, at)
        previous = r["hi"]
    if end - previous > best[0]:
        best = (end - previous, previous)
    return round(best[0] / NS, 3), round(best[1] / NS, 3)


def faults(t: Tables, end_time: int) -> list[dict[str, Any]]:
    lines = t.control.where(F.col("nemesis") & F.col("fault_id").isNotNull())
    rows = (
        lines.groupBy("fault_id")
        .agg(
            F.first("f").alias("f"),
            F.min(F.when(F.col("phase") == "start", F.col("time"))).alias("start"),
            F.max(F.when(F.col("phase") == "end", F.col("time"))).alias("end"),
            F.first("targets", ignorenulls=True).alias("targets"),
            F.array_sort(F.collect_list("index")).alias("indices"),
        )
        .orderBy("start")
        .collect()
    )
    return [
        {
            "id": r["fault_id"],
            "f": r["f"],
            "targets": list(r["targets"] or []),
            "start": r["start"] if r["start"] is not None else 0,
            "end": r["end"] if r["end"] is not None else end_time,
            "indices": list(r["indices"]),
        }
        for r in rows
    ]


def fault_rates(spark: SparkSession, t: Tables, found: list[dict[str, Any]]) -> None:
    """Fill rate_during / rate_before (acked sends per second) into each fault, in place."""
    if not found:
        return
    spans = spark.createDataFrame(
        [(f["id"], f["start"], f["end"]) for f in found], "id long, start long, end long"
    )
    length = F.col("end") - F.col("start")
    # Each span is cut into the seconds it covers, so acks join it on their
    # second (an equi-join) instead of every ack meeting every fault.
    first_s = F.floor((F.col("start") - length) / F.lit(NS)).cast("long")
    last_s = F.floor((F.col("end") - 1) / F.lit(NS)).cast("long")
    spans = spans.withColumn("t", F.explode(F.sequence(F.greatest(first_s, F.lit(0)), last_s)))
    during = (F.col("time") >= F.col("start")) & (F.col("time") < F.col("end"))
    before = (F.col("time") >= F.col("start") - length) & (F.col("time") < F.col("start"))
    counts = (
        ack_times(t)
        .select("time", _second().alias("t"))
        .join(F.broadcast(spans), "t")
        .groupBy("id")
        .agg(F.count(F.when(during, 1)).alias("d"), F.count(F.when(before, 1)).alias("b"))
        .collect()
    )
    by_id = {r["id"]: r for r in counts}
    for f in found:
        r = by_id.get(f["id"])
        span = (f["end"] - f["start"]) / NS
        before_span = min(span, f["start"] / NS)
        f["rate_during"] = round((r["d"] if r else 0) / span, 3) if span > 0 else None
        f["rate_before"] = round((r["b"] if r else 0) / before_span, 3) if before_span > 0 else None


def availability(
    spark: SparkSession, t: Tables, end_time: int, workload_end: int, threshold: float | None
) -> dict[str, Any]:
    line = timeline(t)
    acked = sum(r["acked"] for r in line)
    polled = sum(r["polled"] for r in line)
    duration = max(end_time / NS, 1e-9)
    gap, gap_start = longest_gap(t, 0, workload_end)
    found = faults(t, end_time)
    fault_rates(spark, t, found)
    for f in found:
        f["start_s"] = round(f.pop("start") / NS, 3)
        f["end_s"] = round(f.pop("end") / NS, 3)
    return {
        "send_rate": round(acked / duration, 3),
        "poll_rate": round(polled / duration, 3),
        "longest_gap_s": gap,
        "longest_gap_start_s": gap_start,
        "timeline": line,
        "faults": found,
        "threshold": threshold,
    }


def availability_check(stats: dict[str, Any]) -> list[dict[str, Any]]:
    """Faults during which the acked-send rate fell below the configured threshold."""
    threshold = stats["threshold"]
    return [
        {
            "fault_id": f["id"],
            "f": f["f"],
            "targets": f["targets"],
            "start_s": f["start_s"],
            "end_s": f["end_s"],
            "rate_during": f["rate_during"],
            "threshold": threshold,
            "indices": f["indices"],
        }
        for f in stats["faults"]
        if f["rate_during"] is not None and f["rate_during"] < threshold
    ]
