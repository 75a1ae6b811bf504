"""Availability statistics of every history: throughput timeline, longest ack gap,
rates during faults.

The timeline is one Spark job that ends in one row per (history, second):
the counts of that second's lines, and from its acked values (the cached
per-value table) the first and last ack, the longest gap between two acks
inside the second and the ack-latency percentiles.  A second's ack times and
latencies are gathered into sorted arrays by the same grouping that counts
them: a second holds about a thousand acks, so sorting them there is cheap,
where a window ordered by time sorted every ack in the history (side by side
at 1e7 ops, timeline and gap: 1.2 s against 4.5 s warm).  Gaps across seconds
are the driver's, from each second's first and last ack.  Only these rows and
the fault list reach the driver.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kafka_chaos.checkers import fault_plan, sources
from kafka_chaos.checkers.check import Basis, Check, Context, Findings
from kafka_chaos.checkers.collect import Found
from kafka_chaos.checkers.frames import local_table
from kafka_chaos.checkers.spec_view import CheckedSpec
from kafka_chaos.checkers.tables import Tables
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

NS = 10**9
MS = 1e6
LATENCY_PERCENTILES = {"lat_p50_ms": 0.5, "lat_p99_ms": 0.99}


def second_of(col: str) -> Column:
    """Whole second of the test a time (ns) falls in."""
    return F.floor(F.col(col) / F.lit(NS)).cast("long").alias("t")


def ranked(sorted_values: Column, q: float) -> Column:
    """The element of rank ceil(q * n) of a sorted array (what percentile_approx
    returns while it is exact); null for an empty array."""
    rank = F.greatest(F.lit(1), F.ceil(F.size(sorted_values) * F.lit(q)).cast("int"))
    return F.try_element_at(sorted_values, rank)


def line_counts(t: Tables) -> DataFrame:
    """(hid, t): sends acked, failed and indeterminate, and records polled, per second
    (``Tables.per_second``, which ``Tables.meta`` shares)."""
    return t.per_second.where(F.col("counted") > 0).select(
        "hid", "t", "acked", "failed", "info", "polled"
    )


def ack_seconds(t: Tables) -> DataFrame:
    """(hid, t): first and last ack, longest gap inside the second, latency figures."""
    acked = t.per_value.where(F.col("ack_index").isNotNull())
    per_second = acked.groupBy("hid", second_of("ack_time")).agg(
        F.array_sort(F.collect_list("ack_time")).alias("times"),
        # null without an invoke, and collect_list skips nulls
        F.array_sort(F.collect_list(F.col("ack_time") - F.col("invoke_time"))).alias("lats"),
    )
    times = F.col("times")
    gaps = F.zip_with(F.slice(times, 2, F.size(times)), times, lambda later, ack: later - ack)
    return per_second.select(
        "hid",
        "t",
        F.try_element_at(times, F.lit(1)).alias("first_ack"),
        F.try_element_at(times, F.lit(-1)).alias("last_ack"),
        F.array_max(gaps).alias("gap"),
        F.try_element_at(times, F.array_position(gaps, F.array_max(gaps)).cast("int")).alias(
            "gap_from"
        ),
        *[(ranked(F.col("lats"), q) / MS).alias(name) for name, q in LATENCY_PERCENTILES.items()],
        (F.try_element_at(F.col("lats"), F.lit(-1)) / MS).alias("lat_max_ms"),
    )


def seconds(t: Tables) -> dict[int, list[dict[str, Any]]]:
    """{hid: that history's per-second rows, in time order}, in one job."""
    rows = line_counts(t).join(ack_seconds(t), ["hid", "t"], "full").collect()
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    # Sorted here, not by Spark: a few thousand rows, and orderBy costs a sampling job.
    for r in sorted(rows, key=lambda r: (r["hid"], r["t"])):
        out[r["hid"]].append(r.asDict())
    return out


def timeline(per_second: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "t": r["t"],
            "acked": r["acked"] or 0,
            "failed": r["failed"] or 0,
            "info": r["info"] or 0,
            "polled": r["polled"] or 0,
            **{name: r[name] for name in LATENCY_PERCENTILES},
            "lat_max_ms": r["lat_max_ms"],
        }
        for r in per_second
    ]


def longest_gap(per_second: list[dict[str, Any]], start: int, end: int) -> tuple[float, float]:
    """Longest window in [start, end] ns with no acked send: (length_s, start_s).

    The earliest of equally long windows wins.
    """
    best = (0, start)
    previous = start
    for r in per_second:
        if r["first_ack"] is None:
            continue
        for gap, at in ((r["first_ack"] - previous, previous), (r["gap"], r["gap_from"])):
            if gap is not None and gap > best[0]:
                best = (gap, at)
        previous = r["last_ack"]
    if end - previous > best[0]:
        best = (end - previous, previous)
    return round(best[0] / NS, 3), round(best[1] / NS, 3)


def faults(t: Tables, end_times: dict[int, int]) -> dict[int, list[dict[str, Any]]]:
    """{hid: its faults in start order}; a fault that never ended lasts to the history's end.

    Each fault also says how far it ran from its schedule (``checkers.fault_plan``):
    the planned and realised times its lines carry, in the schedule's seconds.
    """
    lines = t.control.where(F.col("nemesis") & F.col("fault_id").isNotNull())
    start, end = F.col("phase") == "start", F.col("phase") == "end"
    rows = (
        lines.groupBy("hid", "fault_id")
        .agg(
            # f and targets as the fault's first line states them (its lines may differ)
            F.min_by("f", "index").alias("f"),
            F.min(F.when(start, F.col("time"))).alias("start"),
            F.max(F.when(end, F.col("time"))).alias("end"),
            F.min_by("targets", F.when(F.col("targets").isNotNull(), F.col("index"))).alias(
                "targets"
            ),
            F.array_sort(F.collect_list("index")).alias("indices"),
            F.min(F.when(start, F.col("planned_s"))).alias("planned_start"),
            F.min(F.when(start, F.col("at_s"))).alias("realised_start"),
            F.max(F.when(end, F.col("planned_s"))).alias("planned_end"),
            F.max(F.when(end, F.col("at_s"))).alias("realised_end"),
        )
        .orderBy("hid", "start", "fault_id")
        .collect()
    )
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        out[r["hid"]].append(
            {
                "id": r["fault_id"],
                "f": r["f"],
                "targets": list(r["targets"] or []),
                "start": r["start"] if r["start"] is not None else 0,
                "end": r["end"] if r["end"] is not None else end_times[r["hid"]],
                "indices": list(r["indices"]),
                **fault_plan.plan_fields(
                    r["planned_start"],
                    r["realised_start"],
                    r["planned_end"],
                    r["realised_end"],
                    healed=r["end"] is not None,
                ),
            }
        )
    return out


def fault_rates(spark: SparkSession, t: Tables, found: dict[int, list[dict[str, Any]]]) -> None:
    """Fill rate_during / rate_before (acked sends per second) into each fault, in place.

    Before a fault means the same length of time just before it.
    """
    spans = [(hid, f["id"], f["start"], f["end"]) for hid, fs in found.items() for f in fs]
    if not spans:
        return
    spans_df = local_table(spark, spans, "hid int, id long, start long, end long")
    length = F.col("end") - F.col("start")
    # Each span is cut into the seconds it covers, so acks join it on their
    # second (an equi-join) instead of every ack meeting every fault.
    first_s = F.floor((F.col("start") - length) / F.lit(NS)).cast("long")
    last_s = F.floor((F.col("end") - 1) / F.lit(NS)).cast("long")
    spans_df = spans_df.withColumn(
        "t", F.explode(F.sequence(F.greatest(first_s, F.lit(0)), last_s))
    )
    during = (F.col("time") >= F.col("start")) & (F.col("time") < F.col("end"))
    before = (F.col("time") >= F.col("start") - length) & (F.col("time") < F.col("start"))
    acks = t.per_value.where(F.col("ack_index").isNotNull())
    counts = (
        acks.select("hid", F.col("ack_time").alias("time"), second_of("ack_time"))
        .join(F.broadcast(spans_df), ["hid", "t"])
        .groupBy("hid", "id")
        .agg(F.count(F.when(during, 1)).alias("d"), F.count(F.when(before, 1)).alias("b"))
        .collect()
    )
    by_id = {(r["hid"], r["id"]): r for r in counts}
    for hid, fs in found.items():
        for f in fs:
            r = by_id.get((hid, f["id"]))
            span = (f["end"] - f["start"]) / NS
            before_span = min(span, f["start"] / NS)
            d, b = (r["d"], r["b"]) if r else (0, 0)
            f["rate_during"] = round(d / span, 3) if span > 0 else None
            f["rate_before"] = round(b / before_span, 3) if before_span > 0 else None


def availability(
    spark: SparkSession,
    t: Tables,
    meta: dict[int, dict[str, Any]],
    threshold: float | None,
) -> dict[int, dict[str, Any]]:
    """{hid: availability statistics} for every history in ``meta`` (``history_meta``)."""
    per_hid = seconds(t)
    end_times = {hid: m["end_time"] or 0 for hid, m in meta.items()}
    found = faults(t, end_times)
    fault_rates(spark, t, found)
    out = {}
    for hid, m in meta.items():
        end = end_times[hid]
        workload_end = m["drain_start"] if m["drain_start"] is not None else end
        line = timeline(per_hid.get(hid, []))
        duration = max(end / NS, 1e-9)
        gap, gap_start = longest_gap(per_hid.get(hid, []), 0, workload_end)
        fs = found.get(hid, [])
        for f in fs:
            f["start_s"] = round(f.pop("start") / NS, 3)
            f["end_s"] = round(f.pop("end") / NS, 3)
        out[hid] = {
            "send_rate": round(sum(r["acked"] for r in line) / duration, 3),
            "poll_rate": round(sum(r["polled"] for r in line) / duration, 3),
            "longest_gap_s": gap,
            "longest_gap_start_s": gap_start,
            "timeline": line,
            "faults": fs,
            "threshold": threshold,
        }
    return out


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


def stats(ctx: Context) -> dict[int, dict[str, Any]]:
    """``availability`` of every history, once per analysis (statistics and check)."""
    threshold = ctx.spec.spec.checker.availability_min_rate
    return ctx.memo("availability", lambda: availability(ctx.spark, ctx.t, ctx.meta, threshold))


AVAILABILITY = Check(
    name="availability",
    family="availability",
    title="Availability below threshold",
    explanation=(
        "The acknowledged-send rate fell below the configured minimum while a fault was active."
    ),
    finds="a fault during which acked sends/s fell below `checker.availability_min_rate`",
    severity_doc="error",
    meaning="The acknowledged send rate during a fault fell below the configured minimum.",
    causes=(
        "Leader elections, min.insync.replicas blocking writes while replicas are down, or clients"
        " timing out on unreachable brokers."
    ),
    basis=Basis(
        promise=sources.AVAILABLE,
        source=(
            "Kafka's design documentation, 4.7 Replication (Kafka 4.0.0); the rate threshold, "
            "`checker.availability_min_rate`, is the user's own, not a Kafka promise"
        ),
        url=sources.DESIGN_URL,
    ),
)


class AvailabilityFamily:
    """The acked-send rate during faults, judged only where the run set a minimum."""

    name = "availability"
    checks = (AVAILABILITY,)

    def applies(self, spec: CheckedSpec) -> bool:
        return spec.spec.checker.availability_min_rate is not None

    def frames(self, ctx: Context) -> list[DataFrame]:
        return []

    def findings(self, ctx: Context, found: Found) -> Findings:
        slow = {hid: availability_check(s) for hid, s in stats(ctx).items()}
        return Findings(found={hid: {AVAILABILITY.name: (len(s), s)} for hid, s in slow.items()})


AVAILABILITY_FAMILY = AvailabilityFamily()
