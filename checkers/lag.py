"""Realtime lag: how long after its ack a value was first read by anyone."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from checkers.tables import Tables

BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000)
WORST = 5


def realtime_lag(t: Tables) -> dict[str, Any]:
    pv = t.per_value.where(F.col("ack_index").isNotNull() & F.col("read_index").isNotNull())
    lags = pv.select(
        "val",
        "ack_index",
        "read_index",
        ((F.col("read_time") - F.col("ack_time")) / 1e6).alias("lag"),
    )
    bucket = F.lit(None).cast("int")
    for i, edge in reversed(list(enumerate(BUCKETS_MS))):
        bucket = F.when(F.col("lag") <= edge, i).otherwise(bucket)
    lags = lags.withColumn("b", bucket)
    summary = lags.agg(  # one pass: figures and histogram together
        F.count("lag").alias("count"),
        F.percentile_approx("lag", [0.5, 0.95, 0.99]).alias("p"),
        F.max("lag").alias("max"),
        F.mean("lag").alias("mean"),
        *[F.count(F.when(F.col("b") == i, 1)).alias(f"b{i}") for i in range(len(BUCKETS_MS))],
        F.count(F.when(F.col("b").isNull(), 1)).alias("b_over"),
    ).first()
    hist = {i: summary[f"b{i}"] for i in range(len(BUCKETS_MS))}
    hist[None] = summary["b_over"]
    worst = lags.orderBy(F.desc("lag")).limit(WORST).collect()
    p = summary["p"] or [None, None, None]
    return {
        "count": summary["count"],
        "p50_ms": p[0],
        "p95_ms": p[1],
        "p99_ms": p[2],
        "max_ms": summary["max"],
        "mean_ms": round(summary["mean"], 3) if summary["mean"] is not None else None,
        "histogram": [{"le_ms": edge, "count": hist.get(i, 0)} for i, edge in enumerate(BUCKETS_MS)]
        + [{"le_ms": None, "count": hist.get(None, 0)}],
        "worst": [
            {"value": r["val"], "lag_ms": r["lag"], "indices": [r["ack_index"], r["read_index"]]}
            for r in worst
        ],
    }
