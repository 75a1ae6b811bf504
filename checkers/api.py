"""check_history(): judge a history with every check and produce results.json.

The checks come in families (checkers/catalog.py): each family that applies
to the run gives its anomalies as Spark frames, collected together in one
job that keeps only counts and the first N examples per check, then what
frames cannot say (Elle's cycles, share-group lines, tallies).  Every check's
result is then built the same way from its record: severity, validity, texts.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kafka_chaos.checkers import catalog, fault_plan
from kafka_chaos.checkers.availability import statistics as availability
from kafka_chaos.checkers.availability.lag import realtime_lag
from kafka_chaos.checkers.check import Context
from kafka_chaos.checkers.collect import collect_anomalies, union
from kafka_chaos.checkers.examples import name_topics
from kafka_chaos.checkers.history_workload import config_for
from kafka_chaos.checkers.ingest.load import expected_ops, read_rows, rows_dir
from kafka_chaos.checkers.phases import phase
from kafka_chaos.checkers.queue.loss_checks import drain_proven
from kafka_chaos.checkers.ranges import offset_ranges
from kafka_chaos.checkers.remote import probe
from kafka_chaos.checkers.results import (
    build_checks,
    summary,
    unknown_reasons,
    verdict,
    write_results,
)
from kafka_chaos.checkers.session import get_spark
from kafka_chaos.checkers.spec_view import CheckedSpec
from kafka_chaos.checkers.tables import Tables
from pyspark.sql import DataFrame, SparkSession

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
    history: Path | None = None,
) -> dict[int, dict[str, Any]]:
    """Results for every history (hid) in ``ops``; ``examples=None`` keeps every anomaly.

    ``cycles=False`` skips the cycle search (tests of other checks): the
    cycle checks are then ``unknown``.  ``history``: the history.jsonl the
    rows came from, for families that read its lines (share groups); without
    it their checks are ``unknown``.
    """
    spec = CheckedSpec.of(config)
    t = Tables(ops, read_committed=spec.read_committed)
    try:
        ctx = Context(spark, t, spec, examples, history, cycles)
        return _analyse(ctx, stats)
    finally:
        t.release()


def _analyse(ctx: Context, stats: bool) -> dict[int, dict[str, Any]]:
    spark = ctx.spark
    families = catalog.families_for(ctx.spec)
    checks = catalog.checks_for(ctx.spec)
    with phase(spark, "frames"):
        frames = [f for family in families for f in family.frames(ctx)]
        frames += [f for c in checks if c.frames is not None for f in c.frames(ctx)]
    with phase(spark, "collect"):
        # Kept, because the ranges step reads it again: it recomputed every frame
        # of a check with more than one anomaly (at 1e7 transactional ops, its
        # 122,775 int-send-skips cost 11.5 s of Spark more).
        allof = ctx.t.keep(union(frames))
        found = collect_anomalies([allof], ctx.examples)
    counts = {h: {c: v[0] for c, v in per.items()} for h, per in found.items()}
    with phase(spark, "ranges"):
        ranges = offset_ranges([allof], counts, ctx.t.topic_names)
    with phase(spark, "enrich"):
        for enrich in dict.fromkeys(c.enrich for c in checks if c.enrich is not None):
            enrich(ctx.spark, ctx.t, found)
        name_topics(found, ctx.t.topic_names)
    with phase(spark, "meta"):
        ctx.meta = history_meta(ctx.t) or {0: dict(NO_LINES)}
    findings = []
    for family in families:
        with phase(spark, f"findings:{family.name}"):
            findings.append(family.findings(ctx, found))
    for more in findings:
        for hid, by_name in more.found.items():
            found.setdefault(hid, {}).update(by_name)
    results = {}
    for hid, m in ctx.meta.items():
        final = bool(m["final"])
        with phase(spark, "drain-proven"):
            proven = drain_proven(ctx, hid, final)
        results[hid] = {
            "verdict": None,
            "summary": None,
            "unknown_reasons": [],
            "history": None,
            "ops": m["ops"],
            "final_drain": final,
            "evidence": {name: m[name] for name in EVIDENCE},
            "faults_off_plan": None,  # with the statistics: they find the fault spans
            "checks": build_checks(checks, ctx.spec, found.get(hid, {}), proven),
            "stats": {},
        }
        for more in findings:
            for name, fields in _of(more.fields, hid).items():
                results[hid]["checks"][name].update(fields)
        for name, runs in ranges.get(hid, {}).items():
            if counts.get(hid, {}).get(name, 0) > 1:
                results[hid]["checks"][name].update(runs)
        for more in findings:
            results[hid].update(_of(more.sections, hid))
    if stats:
        add_statistics(ctx, results)
    for hid, res in results.items():
        for more in findings:
            res["stats"].update(_of(more.stats, hid))
        res["unknown_reasons"] = unknown_reasons(res["checks"], res["evidence"])
        res["verdict"] = verdict(res["checks"], res["unknown_reasons"])
        res["summary"] = summary(res["checks"], res["evidence"])
    return results


def _of(per_history: dict[int | None, dict[str, Any]], hid: int) -> dict[str, Any]:
    """What ``Findings`` says of every history (key None) and of this one."""
    return {**per_history.get(None, {}), **per_history.get(hid, {})}


def add_statistics(ctx: Context, results: dict[int, dict[str, Any]]) -> None:
    """Availability and realtime-lag statistics of every history, in place (a few
    Spark jobs for all histories together), and the faults that ran off plan."""
    with phase(ctx.spark, "stats:availability"):
        avail = availability.stats(ctx)
    with phase(ctx.spark, "stats:lag"):
        lag = realtime_lag(ctx.t, list(ctx.meta))
    for hid, res in results.items():
        res["stats"] = {"availability": avail[hid], "realtime_lag": lag[hid]}
        res["faults_off_plan"] = fault_plan.summary(avail[hid]["faults"])


def check_history(
    history: Path,
    config: dict[str, Any],
    out: Path | None = None,
    spark_master: str | None = None,
    from_lines: bool = False,
    spark_remote: str | None = None,
) -> dict[str, Any]:
    """Judge ``history`` under run ``config``; write results.json to ``out`` when given.

    ``from_lines``: ``config`` is only defaults (no run config was found), so
    the workload is the one the lines show; otherwise lines that contradict
    the config's workload are refused (checkers/history_workload.py).
    ``spark_remote`` (else the config's, else ``KC_SPARK_REMOTE``): attach to
    that Spark Connect server instead of a Spark of this process.
    """
    history = Path(history)
    checker = CheckedSpec.of(config).spec.checker
    # Spark starts while the history converts: the JVM's start-up (about 5 s)
    # overlaps the Arrow parse instead of coming before it.
    remote = spark_remote or checker.spark_remote
    if remote:
        probe(remote)  # a dead server is one line before any work, not after the parse
    with ThreadPoolExecutor(1) as pool:
        master = spark_master or checker.spark_master
        starting = pool.submit(get_spark, master, expected_ops(history), remote)
        rows = rows_dir(history)
        config = config_for(rows, history, config, from_lines)
        spark = starting.result()
    with phase(spark, "read"):
        ops = read_rows(spark, rows)
    results = analyse(spark, ops, config, examples=int(checker.examples), history=history)
    res = results.get(0) or next(iter(results.values()))
    res["history"] = history.name
    if out is not None:
        write_results(res, Path(out))
    return res
