"""Realtime lag: how long after its ack a value was first read by anyone, per history."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.tables import Tables

BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000)
WORST = 5
PERCENTILES = {"p50_ms": 0.5, "p95_ms": 0.95, "p99_ms": 0.99}


def lags(t: Tables) -> DataFrame:
    """(hid, val, ack_index, read_index, lag): lag in ms, for every acked value read."""
    pv = t.per_value.where(F.col("ack_index").isNotNull() & F.col("read_index").isNotNull())
    return pv.select(
        "hid",
        "val",
        "ack_index",
        "read_index",
        ((F.col("read_time") - F.col("ack_time")) / 1e6).alias("lag"),
    )


def _bucket() -> F.Column:
    """Index of the first ``BUCKETS_MS`` edge a lag is at or under; null above them all."""
    bucket = F.lit(None).cast("int")
    for i, edge in reversed(list(enumerate(BUCKETS_MS))):
        bucket = F.when(F.col("lag") <= edge, i).otherwise(bucket)
    return bucket


def _worst(rows: DataFrame, histories: int) -> dict[int, list]:
    """The ``WORST`` longest lags of each history (ties: smaller value first).

    One history, the common case, takes a bounded top-k of each split (no
    shuffle); several need a ranking per history.
    """
    order = [F.desc("lag"), F.col("val")]
    if histories == 1:
        top = rows.orderBy(*order).limit(WORST).collect()
    else:
        w = Window.partitionBy("hid").orderBy(*order)
        ranked = rows.select("*", F.row_number().over(w).alias("rn")).where(F.col("rn") <= WORST)
        top = ranked.orderBy("hid", "rn").collect()
    out: dict[int, list] = {}
    for r in top:
        out.setdefault(r["hid"], []).append(
            {"value": r["val"], "lag_ms": r["lag"], "indices": [r["ack_index"], r["read_index"]]}
        )
    return out


def realtime_lag(t: Tables, hids: list[int]) -> dict[int, dict[str, Any]]:
    """{hid: lag figures, histogram and worst cases} for each history in ``hids``."""
    rows = lags(t).withColumn("b", _bucket())
    summaries = rows.groupBy("hid").agg(  # one pass: figures and histogram together
        F.count("lag").alias("count"),
        F.percentile_approx("lag", list(PERCENTILES.values())).alias("p"),
        F.max("lag").alias("max"),
        F.mean("lag").alias("mean"),
        *[F.count(F.when(F.col("b") == i, 1)).alias(f"b{i}") for i in range(len(BUCKETS_MS))],
        F.count(F.when(F.col("b").isNull(), 1)).alias("b_over"),
    )
    by_hid = {r["hid"]: r for r in summaries.collect()}
    worst = _worst(rows, len(hids)) if by_hid else {}
    return {hid: _figures(by_hid.get(hid), worst.get(hid, [])) for hid in hids}


def _figures(summary: Any, worst: list) -> dict[str, Any]:
    if summary is None:
        counts = [0] * (len(BUCKETS_MS) + 1)
        p, figures = [None] * len(PERCENTILES), {"count": 0, "max": None, "mean": None}
    else:
        counts = [summary[f"b{i}"] for i in range(len(BUCKETS_MS))] + [summary["b_over"]]
        p, figures = summary["p"], summary.asDict()
    mean = figures["mean"]
    return {
        "count": figures["count"],
        **dict(zip(PERCENTILES, p, strict=True)),
        "max_ms": figures["max"],
        "mean_ms": round(mean, 3) if mean is not None else None,
        "histogram": [
            {"le_ms": edge, "count": n} for edge, n in zip((*BUCKETS_MS, None), counts, strict=True)
        ],
        "worst": worst,
    }
