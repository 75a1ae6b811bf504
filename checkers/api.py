"""check_history(): judge a history with every check and produce results.json.

All checks run as Spark plans over the same flat operations table; their
anomalies are normalised to (hid, check, sort key, example JSON) and collected
in one job that keeps only counts and the first N examples per check.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from checkers import fault_plan
from checkers.availability import availability, availability_check
from checkers.collect import Found, collect_anomalies
from checkers.cycle_checks import Cycles, search
from checkers.group_checks import group_checks
from checkers.history_workload import config_for
from checkers.lag import realtime_lag
from checkers.load import expected_ops, read_rows, rows_dir
from checkers.loss_checks import acked_lost, missing, tallies
from checkers.poll_checks import poll_checks, suspicious_pairs
from checkers.ranges import offset_ranges
from checkers.results import (
    build_checks,
    check_result,
    cycle_checks_for,
    is_ctp,
    is_share,
    is_txn,
    severities,
    share_results,
    summary,
    unknown_reasons,
    verdict,
    write_results,
)
from checkers.send_checks import send_checks
from checkers.session import get_spark
from checkers.share_checks import judge_share
from checkers.tables import TP, Tables, local_table, read_committed
from checkers.txn_checks import txn_checks

MAX_INDICES = 20  # indices kept per example: enough to prove it, bounded
NEIGHBOURS = 3  # offsets either side of a lost value shown in its example
MAX_SKIPPED = 100

def _rows(found: Found, check: str):
    for hid, checks in found.items():
        for ex in checks.get(check, (0, []))[1]:
            yield hid, ex


def enrich(spark: SparkSession, t: Tables, found: Found) -> None:
    """Add the evidence that is only worth computing for shown examples, in place."""
    _duplicate_places(spark, t, found)
    _offset_values(spark, t, found)
    _neighbours(spark, t, found)
    _skipped(spark, t, found)
    _vanished(spark, t, found)


def _indices(col: str) -> F.Column:
    return F.slice(F.sort_array(F.collect_set(col)), 1, MAX_INDICES)


def _duplicate_places(spark: SparkSession, t: Tables, found: Found) -> None:
    wanted = [(hid, ex["value"]) for hid, ex in _rows(found, "duplicate")]
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
    for hid, ex in _rows(found, "duplicate"):
        r = by_key[(hid, ex["value"])]
        ex["positions"] = [[p["topic"], p["partition"], p["offset"]] for p in r["p"]]
        ex["indices"] = list(r["i"])


def _offset_values(spark: SparkSession, t: Tables, found: Found) -> None:
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


def _neighbours(spark: SparkSession, t: Tables, found: Found) -> None:
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


def _skipped(spark: SparkSession, t: Tables, found: Found) -> None:
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


def _vanished(spark: SparkSession, t: Tables, found: Found) -> None:
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


EVIDENCE = ("acked_sends", "read_offsets", "faults", "failed_faults")
NO_LINES = {"ops": 0, "final": 0, "end_time": 0, "drain_start": None, **dict.fromkeys(EVIDENCE, 0)}


def history_meta(t: Tables) -> dict[int, dict[str, Any]]:
    """Per history: ``Tables.meta`` and the evidence counts, in one small job."""
    return {r["hid"]: r.asDict() for r in t.evidence.collect()}


def analyse(
    spark: SparkSession,
    ops: DataFrame,
    config: dict[str, Any],
    examples: int | None = 10,
    stats: bool = True,
    cycles: bool = True,
) -> dict[int, dict[str, Any]]:
    """Results for every history (hid) in ``ops``; ``examples=None`` keeps every anomaly.

    ``cycles=False`` skips the cycle search (tests of other checks): the
    cycle checks are then ``unknown``."""
    t = Tables(ops, read_committed=read_committed(config))
    try:
        return _analyse(spark, t, config, examples, stats, cycles)
    finally:
        t.release()


def _analyse(
    spark: SparkSession,
    t: Tables,
    config: dict[str, Any],
    examples: int | None,
    stats: bool,
    cycles: bool = True,
) -> dict[int, dict[str, Any]]:
    checker = config.get("checker", {})
    pairs = suspicious_pairs(t)
    frames = (
        send_checks(t, pairs)
        + poll_checks(t, pairs)
        + group_checks(
            t,
            float(checker.get("ownership_grace_s", 10.0)),
            float(checker.get("unowned_threshold_s", 30.0)),
        )
    )
    if is_txn(config):
        frames += txn_checks(t, is_ctp(config))
    absent = missing(t)
    frames.append(acked_lost(absent))
    found = collect_anomalies(frames, examples)
    counts_found = {h: {c: v[0] for c, v in per.items()} for h, per in found.items()}
    ranges = offset_ranges(frames, counts_found, t.topic_names)
    losses = tallies(absent, t.topic_names)
    enrich(spark, t, found)
    name_topics(found, t.topic_names)
    searched = None
    if is_txn(config):
        if cycles and checker.get("cycles", True):
            searched = search(t, config, examples)
        else:
            searched = Cycles(unknown="the cycle search was turned off (checker.cycles)")
        for hid, by_name in searched.found.items():
            found.setdefault(hid, {}).update(by_name)
    meta = history_meta(t) or {0: dict(NO_LINES)}
    results = {}
    for hid, m in meta.items():
        per_check = found.get(hid, {})
        counts = {c: v[0] for c, v in per_check.items()}
        exs = {c: v[1] for c, v in per_check.items()}
        final = bool(m["final"])
        results[hid] = {
            "verdict": None,
            "summary": None,
            "unknown_reasons": [],
            "history": None,
            "ops": m["ops"],
            "final_drain": final,
            "evidence": {name: m[name] for name in EVIDENCE},
            "faults_off_plan": None,  # with the statistics: they find the fault spans
            "checks": build_checks(counts, exs, config, final, losses.get(hid)),
            "stats": {},
        }
        for name, runs in ranges.get(hid, {}).items():
            if counts.get(name, 0) > 1:
                results[hid]["checks"][name].update(runs)
        if searched is not None:
            results[hid]["cycles"] = searched.summary
            checks = results[hid]["checks"]
            if searched.unknown:
                for name in cycle_checks_for(config):
                    checks[name].update(valid="unknown", reason=searched.unknown)
            elif searched.timeouts:  # what the search did not finish proves nothing
                reason = f"Elle's search timed out in {searched.timeouts} part(s) of the graph"
                for name in cycle_checks_for(config):
                    if not checks[name]["count"]:
                        checks[name].update(valid="unknown", reason=reason)
    if stats:
        add_statistics(spark, t, results, meta, config)
    for res in results.values():
        res["unknown_reasons"] = unknown_reasons(res["checks"], res["evidence"])
        res["verdict"] = verdict(res["checks"], res["unknown_reasons"])
        res["summary"] = summary(res["checks"], res["evidence"])
    return results


def add_statistics(
    spark: SparkSession,
    t: Tables,
    results: dict[int, dict[str, Any]],
    meta: dict[int, dict[str, Any]],
    config: dict[str, Any],
) -> None:
    """Availability and realtime-lag statistics of every history, in place (a few
    Spark jobs for all histories together); the faults that ran off plan; the
    availability check when configured."""
    threshold = config.get("checker", {}).get("availability_min_rate")
    avail = availability(spark, t, meta, threshold)
    lag = realtime_lag(t, list(meta))
    for hid, res in results.items():
        res["stats"] = {"availability": avail[hid], "realtime_lag": lag[hid]}
        res["faults_off_plan"] = fault_plan.summary(avail[hid]["faults"])
        if threshold is not None:
            slow = availability_check(avail[hid])
            res["checks"]["availability"] = check_result(
                "availability", len(slow), severities(config)["availability"], slow
            )


def add_share_checks(
    spark: SparkSession, history: Path, config: dict[str, Any], res: dict[str, Any], examples: int
) -> None:
    """Judge a share-group run's share lines (checkers/share_checks.py) and redo the verdict."""
    found, tallies, incomplete, stats = judge_share(spark, history, examples)
    share_results(res["checks"], found, tallies, incomplete, config)
    res["stats"]["share"] = stats
    res["unknown_reasons"] = unknown_reasons(res["checks"], res["evidence"])
    res["verdict"] = verdict(res["checks"], res["unknown_reasons"])


def check_history(
    history: Path,
    config: dict[str, Any],
    out: Path | None = None,
    spark_master: str | None = None,
    from_lines: bool = False,
) -> dict[str, Any]:
    """Judge ``history`` under run ``config``; write results.json to ``out`` when given.

    ``from_lines``: ``config`` is only defaults (no run config was found), so
    the workload is the one the lines show; otherwise lines that contradict
    the config's workload are refused (checkers/history_workload.py).
    """
    history = Path(history)
    checker = config.get("checker", {})
    # Spark starts while the history converts: the JVM's start-up (about 5 s)
    # overlaps the Arrow parse instead of coming before it.
    with ThreadPoolExecutor(1) as pool:
        master = spark_master or checker.get("spark_master")
        starting = pool.submit(get_spark, master, expected_ops(history))
        rows = rows_dir(history)
        config = config_for(rows, history, config, from_lines)
        spark = starting.result()
    ops = read_rows(spark, rows)
    examples = int(checker.get("examples", 10))
    results = analyse(spark, ops, config, examples=examples)
    res = results.get(0) or next(iter(results.values()))
    res["history"] = history.name
    if is_share(config):
        add_share_checks(spark, history, config, res, examples)
    if out is not None:
        write_results(res, Path(out))
    return res
