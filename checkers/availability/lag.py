"""Realtime lag: how long after its ack a value was first read by anyone, per history."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from kafka_chaos.checkers.frames import local_table
from kafka_chaos.checkers.tables import Tables
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000)
WORST = 5
PERCENTILES = {"p50_ms": 0.5, "p95_ms": 0.95, "p99_ms": 0.99}


def lags(t: Tables) -> DataFrame:
    """(hid, val, ack_index, read_index, ns, lag): lag in ns and in ms, for every
    acked value read."""
    pv = t.per_value.where(F.col("ack_index").isNotNull() & F.col("read_index").isNotNull())
    ns = F.col("read_time") - F.col("ack_time")
    return pv.select(
        "hid", "val", "ack_index", "read_index", ns.alias("ns"), (ns / 1e6).alias("lag")
    )


# Percentiles are exact ranks, found in two small jobs instead of Spark's
# percentile_approx (whose sketch of 4e6 lags was 4 of the 5 CPU-seconds of the
# lag summary at 1e7 ops, and which is only approximate there).  The summary
# counts the lags in fine buckets, 64 per doubling and ordered like the lags;
# a percentile whose rank falls in a bucket holding one distinct lag is that
# lag, and only the other buckets' lags are counted value by value.
FINE_STEPS = 64
_SIGN = 1 << 20  # above any fine bucket of a positive lag's magnitude


def _fine_bucket() -> F.Column:
    """Bucket of ``ns`` (a lag in ns); buckets are ordered as their lags are."""
    ns = F.col("ns")
    magnitude = F.floor(F.log2(F.abs(ns).cast("double")) * F.lit(FINE_STEPS)).cast("long")
    return (
        F.when(ns > 0, F.lit(_SIGN) + magnitude)
        .when(ns < 0, -F.lit(_SIGN) - magnitude)
        .otherwise(F.lit(0))
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
    rows = lags(t).withColumn("b", _bucket()).withColumn("fb", _fine_bucket())
    buckets: dict[int, list] = defaultdict(list)
    summary = rows.groupBy("hid", "fb", "b").agg(
        F.count(F.lit(1)).alias("n"),
        F.min("ns").alias("lo"),
        F.max("ns").alias("hi"),
        F.sum("lag").alias("total"),
    )
    for r in summary.collect():
        buckets[r["hid"]].append(r)
    for rs in buckets.values():
        rs.sort(key=lambda r: (r["fb"], r["b"] if r["b"] is not None else len(BUCKETS_MS)))
    found = {hid: _rank_buckets(rs) for hid, rs in buckets.items()}
    crowded = {(hid, lo, hi) for hid, f in found.items() for lo, hi, _ in f.values() if lo != hi}
    exact = _count_values(rows, sorted(crowded))
    percentiles = {
        hid: {q: _percentile(exact, hid, *where) for q, where in f.items()}
        for hid, f in found.items()
    }
    worst = _worst(rows, len(hids)) if buckets else {}
    return {
        hid: _figures(buckets.get(hid, []), percentiles.get(hid), worst.get(hid, []))
        for hid in hids
    }


def _rank_buckets(rs: list) -> dict[float, tuple[int, int, int]]:
    """For each percentile q: (lo, hi, rank within the bucket) of the bucket, among
    ``rs`` in lag order, that holds the lag of rank ceil(q * n)."""
    n = sum(r["n"] for r in rs)
    found = {}
    for q in PERCENTILES.values():
        rank, before = max(1, math.ceil(q * n)), 0
        r = next(r for r in rs if (before := before + r["n"]) >= rank)
        found[q] = (r["lo"], r["hi"], rank - (before - r["n"]))
    return found


def _count_values(
    rows: DataFrame, crowded: list[tuple[int, int, int]]
) -> dict[tuple[int, int, int], list[tuple[int, int]]]:
    """{(hid, lo, hi): [(lag ns, how many), ...] in order} for buckets holding
    several distinct lags."""
    if not crowded:
        return {}
    spans = F.broadcast(local_table(rows.sparkSession, crowded, "hid int, lo long, hi long"))
    within = (F.col("ns") >= F.col("lo")) & (F.col("ns") <= F.col("hi"))
    counted = rows.select("hid", "ns").join(spans, "hid").where(within)
    out: dict[tuple[int, int, int], list[tuple[int, int]]] = defaultdict(list)
    for r in counted.groupBy("hid", "lo", "hi", "ns").count().collect():
        out[(r["hid"], r["lo"], r["hi"])].append((r["ns"], r["count"]))
    for values in out.values():
        values.sort()
    return out


def _percentile(exact: dict, hid: int, lo: int, hi: int, rank: int) -> float:
    """The lag (ms) of ``rank`` within the bucket [lo, hi] ns of history ``hid``."""
    if lo == hi:
        return lo / 1e6
    seen = 0
    for ns, count in exact[(hid, lo, hi)]:
        seen += count
        if seen >= rank:
            return ns / 1e6
    raise AssertionError("a bucket holds fewer lags than its count")


def _figures(rs: list, percentiles: dict[float, float] | None, worst: list) -> dict[str, Any]:
    counts = [0] * (len(BUCKETS_MS) + 1)
    for r in rs:
        counts[r["b"] if r["b"] is not None else len(BUCKETS_MS)] += r["n"]
    n = sum(counts)
    return {
        "count": n,
        **{name: percentiles[q] if n else None for name, q in PERCENTILES.items()},
        "max_ms": max(r["hi"] for r in rs) / 1e6 if n else None,
        "mean_ms": round(sum(r["total"] for r in rs) / n, 3) if n else None,
        "histogram": [
            {"le_ms": edge, "count": c} for edge, c in zip((*BUCKETS_MS, None), counts, strict=True)
        ],
        "worst": worst,
    }
