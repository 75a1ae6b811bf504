"""Evidence for the examples a report shows, gathered only for those.

Why apart from the checks: an anomaly's frame carries only what finding it
gives for free.  The rest (every position of a duplicate, the neighbours of
a lost value, what the drain found where a value vanished) is worth a join
only for the handful of examples kept.  A check names its
enricher in its record (``checkers.check.Check.enrich``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kafka_chaos.checkers.collect import Found
from kafka_chaos.checkers.frames import TP, local_table
from kafka_chaos.checkers.tables import Tables
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

MAX_INDICES = 20  # indices kept per example: enough to prove it, bounded
NEIGHBOURS = 3  # offsets either side of a lost value shown in its example
MAX_SKIPPED = 100


def _rows(found: Found, check: str):
    for hid, checks in found.items():
        for ex in checks.get(check, (0, []))[1]:
            yield hid, ex


def _indices(col: str) -> F.Column:
    return F.slice(F.sort_array(F.collect_set(col)), 1, MAX_INDICES)


def duplicate_places(spark: SparkSession, t: Tables, found: Found) -> None:
    """Every position and index of each shown duplicate value, acknowledged or not
    (both checks name this enricher; ``checkers.api`` runs it once)."""
    names = ("duplicate", "duplicate-unacked")
    shown = [(hid, ex) for name in names for hid, ex in _rows(found, name)]
    wanted = [(hid, ex["value"]) for hid, ex in shown]
    if not wanted:
        return
    values = local_table(spark, wanted, "hid int, val long")
    rows = (
        t.positions.join(F.broadcast(values), ["hid", "val"])
        .groupBy("hid", "val")
        .agg(
            F.array_sort(F.collect_set(F.struct("topic", "partition", "offset"))).alias("p"),
            _indices("index").alias("i"),
        )
        .collect()
    )
    by_key = {(r["hid"], r["val"]): r for r in rows}
    for hid, ex in shown:
        r = by_key[(hid, ex["value"])]
        ex["positions"] = [[p["topic"], p["partition"], p["offset"]] for p in r["p"]]
        ex["indices"] = list(r["i"])


def offset_values(spark: SparkSession, t: Tables, found: Found) -> None:
    """Every value seen at each shown inconsistent offset."""
    wanted = [
        (hid, ex["topic"], ex["partition"], ex["offset"])
        for hid, ex in _rows(found, "inconsistent-offsets")
    ]
    if not wanted:
        return
    places = local_table(spark, wanted, "hid int, topic int, partition int, offset long")
    rows = (
        t.positions.where(F.col("val").isNotNull())
        .join(F.broadcast(places), [*TP, "offset"])
        .groupBy(*TP, "offset")
        .agg(F.array_sort(F.collect_set("val")).alias("v"), _indices("index").alias("i"))
        .collect()
    )
    by_key = {(r["hid"], r["topic"], r["partition"], r["offset"]): r for r in rows}
    for hid, ex in _rows(found, "inconsistent-offsets"):
        r = by_key[(hid, ex["topic"], ex["partition"], ex["offset"])]
        ex["values"], ex["indices"] = list(r["v"]), list(r["i"])


def _placed(ex: dict[str, Any]) -> bool:
    """Whether an example names a position (an ack without a delivery report does not)."""
    return all(ex.get(k) is not None for k in ("topic", "partition", "offset"))


def neighbours(spark: SparkSession, t: Tables, found: Found) -> None:
    """What was acked and read at the offsets around each shown lost or unseen value."""
    wanted = [
        (hid, ex["topic"], ex["partition"], ex["offset"])
        for check in ("lost-write", "unseen")
        for hid, ex in _rows(found, check)
        if _placed(ex)
    ]
    near = []
    if wanted:
        holes = local_table(spark, wanted, "hid int, topic int, partition int, hole long")
        near = (
            t.positions.join(F.broadcast(holes), TP)
            .where(F.abs(F.col("offset") - F.col("hole")) <= NEIGHBOURS)
            .select(*TP, "hole", "offset", "val", "ack", "read")
            .distinct()
            .collect()
        )
    seen: dict[tuple, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in near:
        if not (r["ack"] or r["read"]):
            continue  # a report of an aborted or unknown send: neither acked nor read
        cell = seen[(r["hid"], r["topic"], r["partition"], r["hole"])].setdefault(
            r["offset"], {"offset": r["offset"], "acked_value": None, "read_values": set()}
        )
        if r["ack"]:
            cell["acked_value"] = r["val"]
        elif r["val"] is not None:
            cell["read_values"].add(r["val"])
    for check in ("lost-write", "unseen"):
        for hid, ex in _rows(found, check):
            cells = seen.get((hid, ex.get("topic"), ex.get("partition"), ex.get("offset")), {})
            ex["neighbours"] = [
                {**c, "read_values": sorted(c["read_values"])} for _, c in sorted(cells.items())
            ]


def skipped(spark: SparkSession, t: Tables, found: Found) -> None:
    """The offsets known to hold values that each shown poll-skip jumped over."""
    wanted = [
        (hid, ex["topic"], ex["partition"], ex["from_offset"], ex["to_offset"])
        for hid, ex in _rows(found, "poll-skip")
    ]
    if not wanted:
        return
    jumps = local_table(spark, wanted, "hid int, topic int, partition int, a long, b long")
    known = t.per_position.select(*TP, "offset")
    rows = (
        known.join(F.broadcast(jumps), TP)
        .where((F.col("offset") > F.col("a")) & (F.col("offset") < F.col("b")))
        .groupBy(*TP, "a", "b")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.slice(F.array_sort(F.collect_list("offset")), 1, MAX_SKIPPED).alias("s"),
        )
        .collect()
    )
    by_key = {(r["hid"], r["topic"], r["partition"], r["a"], r["b"]): r for r in rows}
    for hid, ex in _rows(found, "poll-skip"):
        r = by_key.get((hid, ex["topic"], ex["partition"], ex["from_offset"], ex["to_offset"]))
        indices = ex.pop("indices")
        ex["skipped_count"] = r["n"] if r else 0
        ex["skipped"] = list(r["s"]) if r else []
        ex["indices"] = indices


def vanished(spark: SparkSession, t: Tables, found: Found) -> None:
    """For ``acked-lost`` examples: who read the value before it vanished
    (``read_process``), and what the final drain found at its offset now
    (``now_values``: empty when nothing, e.g. past the end of the log)."""
    shown = list(_rows(found, "acked-lost"))
    if not shown:
        return
    for _, ex in shown:  # an example's JSON leaves out what is null
        ex.setdefault("read_index", None)
        ex.setdefault("high_watermark", None)
    placed = [(hid, ex["topic"], ex["partition"], ex["offset"]) for hid, ex in shown if _placed(ex)]
    now = []
    if placed:
        places = local_table(spark, placed, "hid int, topic int, partition int, offset long")
        now = (
            t.reads.where(F.col("final"))
            .join(F.broadcast(places), [*TP, "offset"])
            .groupBy(*TP, "offset")
            .agg(F.array_sort(F.collect_set("val")).alias("v"))
            .collect()
        )
    now_at = {(r["hid"], r["topic"], r["partition"], r["offset"]): list(r["v"]) for r in now}
    first_reads = [
        (hid, ex["read_index"], ex["value"]) for hid, ex in shown if ex["read_index"] is not None
    ]
    readers: dict[tuple, int] = {}
    if first_reads:
        wanted = local_table(spark, first_reads, "hid int, index long, val long")
        for r in t.reads.join(F.broadcast(wanted), ["hid", "index", "val"]).collect():
            readers[(r["hid"], r["index"])] = r["process"]
    for hid, ex in shown:
        ex["read_process"] = readers.get((hid, ex["read_index"]))
        place = (hid, ex.get("topic"), ex.get("partition"), ex.get("offset"))
        ex["now_values"] = now_at.get(place, [])


def name_topics(found: Found, names: dict[int, str]) -> None:
    """Put topic names back into the examples, in place (rows hold topic ids)."""
    for checks in found.values():
        for _, examples in checks.values():
            for ex in examples:
                if "topic" in ex:
                    ex["topic"] = names[ex["topic"]]
                if "positions" in ex:
                    ex["positions"] = [[names[t], p, o] for t, p, o in ex["positions"]]
