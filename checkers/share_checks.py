"""The share-group checks in Spark (definitions: checkers/reference_share.py, docs/results.md).

Share lines are read straight from history.jsonl with Spark's JSON reader:
only share-group runs need them, and the shared ingest stays as it is for
every other run.  The driver collects counts and a few examples, never the
history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checkers.collect import collect_anomalies
from checkers.reference_share import FINAL_ACKS
from checkers.tables import anomaly

LINE = "index long, time long, process string, type string, f string, value string"
RECORDS = (
    "group string, records array<struct<topic string, partition int, offset long, "
    "value long, delivery_count int>>"
)
ACKS = (
    "group string, acks array<struct<topic string, partition int, offset long, value long, "
    "type string>>, failed array<struct<topic string, partition int>>"
)
REC = ["group", "topic", "partition", "offset"]
SHARE_LINES = ("share-subscribe", "share-poll", "share-ack", "share-drain", "crash", "send")


class ShareTables:
    """Deliveries, acks with outcomes, crashes, groups and sends of one history."""

    def __init__(self, spark: SparkSession, history: Path) -> None:
        lines = spark.read.schema(LINE).json(str(history)).where(F.col("f").isin(*SHARE_LINES))
        self.lines = lines.where(F.col("index").isNotNull()).cache()
        sub = F.from_json(
            "value", "group string, topics array<string>, lock_ms long, delivery_limit int"
        )
        self.groups = (
            self.lines.where((F.col("f") == "share-subscribe") & (F.col("type") == "ok"))
            .select(
                sub["group"].alias("group"),
                sub["delivery_limit"].alias("limit"),
                F.explode(sub["topics"]).alias("subscribed"),
            )
            .groupBy("group")
            .agg(F.max("limit").alias("limit"), F.collect_set("subscribed").alias("topics"))
        )
        drain = F.from_json("value", "group string, complete boolean")
        self.drains = (
            self.lines.where(F.col("f") == "share-drain")
            .select(drain["group"].alias("group"), drain["complete"].alias("complete"))
            .groupBy("group")
            .agg(F.max(F.col("complete").cast("int")).alias("complete"))
        )
        self.crashes = (
            self.lines.where(F.col("f") == "crash")
            .groupBy("process")
            .agg(F.min("time").alias("crash_time"))
        )
        sent = F.from_json("value", "topic string, partition int, offset long, value long")
        self.sends = self.lines.where((F.col("f") == "send") & (F.col("type") == "ok")).select(
            sent["topic"].alias("topic"),
            sent["partition"].alias("partition"),
            sent["offset"].alias("offset"),
            sent["value"].alias("value"),
            F.col("index").alias("ack_index"),
            F.col("time").alias("ack_time"),
        )
        self.deliveries = self._deliveries().cache()
        self.acks = self._acks().cache()

    def _paired(self, f: str) -> DataFrame:
        """Lines of ``f`` with the previous line of that ``f`` by the same process."""
        by_process = Window.partitionBy("process").orderBy("index")
        rows = self.lines.where(F.col("f") == f)
        return rows.select(
            "*",
            F.lag("type").over(by_process).alias("prev_type"),
            F.lag("time").over(by_process).alias("prev_time"),
            F.lag("index").over(by_process).alias("prev_index"),
            F.lag("value").over(by_process).alias("prev_value"),
            F.lead("type").over(by_process).alias("next_type"),
        )

    def _deliveries(self) -> DataFrame:
        polls = self._paired("share-poll").where(F.col("type") == "ok")
        parsed = F.from_json("value", RECORDS)
        invoked = F.when(F.col("prev_type") == "invoke", F.col("prev_time")).otherwise(
            F.col("time")
        )
        return polls.select(
            parsed["group"].alias("group"),
            F.col("process"),
            invoked.alias("invoke_time"),
            "time",
            "index",
            F.explode(parsed["records"]).alias("r"),
        ).select(
            "group", "process", "invoke_time", "time", "index",
            F.col("r.topic").alias("topic"), F.col("r.partition").alias("partition"),
            F.col("r.offset").alias("offset"), F.col("r.value").alias("value"),
            F.col("r.delivery_count").alias("count"),
        )  # fmt: skip

    def _acks(self) -> DataFrame:
        rows = self._paired("share-ack")
        completed = rows.where(F.col("type") != "invoke").select(
            "process", "type", "value",
            F.when(F.col("prev_type") == "invoke", F.col("prev_time"))
            .otherwise(F.col("time")).alias("invoke_time"),
            F.when(F.col("prev_type") == "invoke", F.col("prev_index"))
            .otherwise(F.col("index")).alias("invoke_index"),
            F.col("time").alias("done_time"), F.col("index").alias("done_index"),
        )  # fmt: skip
        unanswered = F.col("next_type").isNull() | (F.col("next_type") == "invoke")
        never = rows.where((F.col("type") == "invoke") & unanswered).select(
            "process", F.lit("never").alias("type"), "value", F.col("time").alias("invoke_time"),
            F.col("index").alias("invoke_index"), F.lit(None).cast("long").alias("done_time"),
            F.lit(None).cast("long").alias("done_index"),
        )  # fmt: skip
        parsed = F.from_json("value", ACKS)
        exploded = completed.unionByName(never).select(
            "process", "type", "invoke_time", "invoke_index", "done_time", "done_index",
            parsed["group"].alias("group"), F.coalesce(parsed["failed"], F.array()).alias("failed"),
            F.explode(parsed["acks"]).alias("a"),
        )  # fmt: skip
        failed = F.exists(
            "failed",
            lambda x: (x["topic"] == F.col("a.topic")) & (x["partition"] == F.col("a.partition")),
        )
        outcome = (
            F.when(F.col("type") == "fail", "refused")
            .when((F.col("type") == "ok") & ~failed, "committed")
            .otherwise("unknown")
        )
        return exploded.select(
            "group", "process", "invoke_time", "invoke_index",
            F.col("done_time").alias("time"), F.col("done_index").alias("index"),
            F.col("a.topic").alias("topic"), F.col("a.partition").alias("partition"),
            F.col("a.offset").alias("offset"), F.col("a.value").alias("value"),
            F.col("a.type").alias("ack_type"), outcome.alias("outcome"),
        )  # fmt: skip

    def release(self) -> None:
        for df in (self.lines, self.deliveries, self.acks):
            df.unpersist()


def _place() -> list[Any]:
    return [F.col(c) for c in ("group", "topic", "partition", "offset", "value")]


def _hid(df: DataFrame) -> DataFrame:
    return df.withColumn("hid", F.lit(0))


def double_acquire(t: ShareTables) -> list[DataFrame]:
    d = t.deliveries
    same = Window.partitionBy(*REC, "count").orderBy("time", "index")
    twice = d.select(
        "*",
        F.row_number().over(same).alias("rn"),
        F.first("process").over(same).alias("first_process"),
        F.first("index").over(same).alias("first_index"),
    ).where(F.col("rn") > 1)
    fields = [*_place(), F.lit("same delivery count").alias("how"),
              F.col("count").alias("delivery_count"),
              F.array("first_index", "index").alias("indices")]  # fmt: skip
    same_count = anomaly(
        _hid(twice.where(F.col("process") != F.col("first_process"))),
        "share-double-acquire", F.col("index"), *fields,
    )  # fmt: skip
    stalled = anomaly(
        _hid(twice.where(F.col("process") == F.col("first_process"))),
        "share-delivery-count-stalled", F.col("index"), *fields,
    )  # fmt: skip
    committed = t.acks.where(F.col("outcome") == "committed").alias("a")
    mine = d.alias("m")
    held = (
        committed.join(
            mine,
            [F.col(f"a.{c}") == F.col(f"m.{c}") for c in REC]
            + [F.col("a.process") == F.col("m.process"), F.col("m.time") <= F.col("a.invoke_time")],
        )
        .groupBy(*[F.col(f"a.{c}") for c in REC], "a.process", "a.invoke_time", "a.invoke_index",
                 "a.value", "a.ack_type")
        .agg(F.max("m.time").alias("held_from"))
        .join(t.crashes, "process", "left")
        .where(F.col("crash_time").isNull() | (F.col("crash_time") >= F.col("invoke_time")))
    )  # fmt: skip
    other = d.select(*REC, F.col("process").alias("q"), F.col("time").alias("t2"),
                     F.col("index").alias("q_index"))  # fmt: skip
    after = (
        held.join(other, REC)
        .where(
            (F.col("q") != F.col("process"))
            & (F.col("t2") > F.col("held_from"))
            & (F.col("t2") < F.col("invoke_time"))
        )
        .groupBy(*REC, "process", "invoke_time", "invoke_index", "value", "ack_type")
        .agg(F.min("q_index").alias("q_index"))
    )
    applied_late = anomaly(
        _hid(after), "share-double-acquire", F.col("invoke_index"), *_place(),
        F.lit("ack applied after redelivery").alias("how"), F.col("ack_type"),
        F.array("q_index", "invoke_index").alias("indices"),
    )  # fmt: skip
    return [same_count, stalled, applied_late]


def redelivered_after(t: ShareTables) -> list[DataFrame]:
    committed = (F.col("outcome") == "committed") & F.col("time").isNotNull()
    final = t.acks.where(committed & F.col("ack_type").isin(*FINAL_ACKS)).select(
        *REC, "value", "ack_type", F.col("process").alias("ack_process"),
        F.col("time").alias("ack_time"), "invoke_index", F.col("index").alias("ack_index"),
    )  # fmt: skip
    later = (
        final.join(t.deliveries.select(*REC, "invoke_time", F.col("index").alias("d_index")), REC)
        .where(F.col("invoke_time") > F.col("ack_time"))
        .groupBy(*REC, "value", "ack_type", "ack_process", "ack_time", "invoke_index", "ack_index")
        .agg(F.min("d_index").alias("d_index"))
    )
    return [
        anomaly(
            _hid(later.where(F.col("ack_type") == kind)),
            f"share-redelivered-after-{kind}",
            F.col("ack_index"),
            *_place(),
            "ack_process",
            "ack_time",
            F.array("invoke_index", "ack_index", "d_index").alias("indices"),
        )  # fmt: skip
        for kind in FINAL_ACKS
    ]


def delivery_count(t: ShareTables) -> DataFrame:
    d = t.deliveries.join(t.groups, "group", "left").alias("d")
    e = t.deliveries.select(*REC, F.col("time").alias("e_time"), F.col("count").alias("e_count"),
                            F.col("index").alias("e_index"))  # fmt: skip
    backwards = (
        d.join(e, REC, "left")
        .withColumn(
            "lower",
            (F.col("e_time") < F.col("invoke_time")) & (F.col("e_count") > F.col("count")),
        )
        .groupBy(*REC, "value", "index", "count", "limit")
        .agg(F.max(F.when(F.col("lower"), F.col("e_index"))).alias("e_index"))
        .where(F.col("e_index").isNotNull() | (F.col("count") > F.col("limit")))
    )
    return anomaly(
        _hid(backwards), "share-delivery-count", F.col("index"), *_place(),
        F.col("count").alias("delivery_count"), F.col("limit").alias("delivery_limit"),
        F.array_compact(F.array("e_index", "index")).alias("indices"),
    )  # fmt: skip


def _final_flags() -> list[Any]:
    final = F.col("ack_type").isin(*FINAL_ACKS)
    return [
        F.max((final & (F.col("outcome") == "committed")).cast("int")).alias("final_committed"),
        F.max((final & (F.col("outcome") == "unknown")).cast("int")).alias("final_unknown"),
        F.max((F.col("outcome") == "unknown").cast("int")).alias("any_unknown"),
    ]


def missing_redelivery(t: ShareTables) -> DataFrame:
    last_first = Window.partitionBy(*REC).orderBy(F.desc("time"), F.desc("index"))
    last = (
        t.deliveries.withColumn("rn", F.row_number().over(last_first))
        .where(F.col("rn") == 1)
        .select(*REC, "value", "process", F.col("time").alias("last_time"), "count", "index")
    )
    closing = (
        last.select(*REC, "last_time")
        .join(t.acks.drop("value", "process", "index", "time"), REC)
        .where(F.col("invoke_time") >= F.col("last_time"))
        .groupBy(*REC)
        .agg(*_final_flags())
    )
    stranded = (
        last.join(closing, REC, "left")
        .join(t.groups, "group", "left")
        .join(t.drains, "group", "left")
        .where(
            F.coalesce(F.col("final_committed"), F.lit(0)).eqNullSafe(0)
            & F.coalesce(F.col("any_unknown"), F.lit(0)).eqNullSafe(0)
            & (F.col("count") < F.col("limit"))
            & (F.col("complete") == 1)
        )
    )
    return anomaly(
        _hid(stranded), "share-missing-redelivery", F.col("index"), *_place(),
        F.col("count").alias("delivery_count"), F.array("index").alias("indices"),
    )  # fmt: skip


def lost(t: ShareTables) -> tuple[DataFrame, DataFrame]:
    """(the share-lost anomalies, per-value tallies: undecided / at the limit)."""
    complete = t.groups.join(t.drains.where(F.col("complete") == 1), "group")
    candidates = complete.join(t.sends, F.array_contains("topics", F.col("topic")))
    flags = t.acks.groupBy(*REC).agg(*_final_flags())
    counts = t.deliveries.groupBy(*REC).agg(F.max("count").alias("max_count"))
    judged = (
        candidates.join(flags, REC, "left")
        .join(counts, REC, "left")
        .where(F.coalesce(F.col("final_committed"), F.lit(0)) == 0)
        .withColumn(
            "state",
            F.when(F.col("final_unknown") == 1, "undecided")
            .when(F.col("max_count") >= F.col("limit"), "at-limit")
            .otherwise("lost"),
        )
    )
    anomalies = anomaly(
        _hid(judged.where(F.col("state") == "lost")), "share-lost", F.col("ack_index"),
        *_place(), "ack_index", F.array("ack_index").alias("indices"),
    )  # fmt: skip
    tallies = judged.where(F.col("state") != "lost").groupBy("state").count()
    return anomalies, tallies


def share_frames(t: ShareTables) -> tuple[list[DataFrame], DataFrame]:
    lost_frame, tallies = lost(t)
    frames = [lost_frame, *double_acquire(t), *redelivered_after(t), delivery_count(t),
              missing_redelivery(t)]  # fmt: skip
    return frames, tallies


def share_stats(t: ShareTables) -> dict[str, Any]:
    """Per group: how long acknowledged records waited for their first delivery, and
    per crash, how long until the records the crashed member held were delivered again."""
    ms = 1e-6
    first = t.deliveries.groupBy(*REC).agg(F.min("time").alias("first_time"))
    wait = (
        first.join(t.sends.select("topic", "partition", "offset", "ack_time"), REC[1:])
        .select("group", ((F.col("first_time") - F.col("ack_time")) * ms).alias("ms"))
        .groupBy("group")
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.percentile_approx("ms", 0.5).alias("p50_ms"),
            F.percentile_approx("ms", 0.99).alias("p99_ms"),
            F.max("ms").alias("max_ms"),
        )
    )
    acked_by = t.acks.select(*REC, "process")
    # What a member held when it crashed: records whose latest delivery before the
    # crash was to it and that it never acknowledged (one row per record and crash).
    held = (
        t.deliveries.join(t.crashes, "process")
        .where(F.col("time") <= F.col("crash_time"))
        .join(acked_by, [*REC, "process"], "left_anti")
        .groupBy(*REC, "process", "crash_time")
        .agg(F.max("time").alias("held_since"))
    )
    others = t.deliveries.select(*REC, F.col("process").alias("to"), F.col("time").alias("at"))
    taken_before_crash = (
        (F.col("at") > F.col("held_since"))
        & (F.col("at") <= F.col("crash_time"))
        & (F.col("to") != F.col("process"))
    )
    back = (
        held.join(others, REC)
        .groupBy(*REC, "process", "crash_time")
        .agg(
            F.max(F.when(taken_before_crash, 1)).alias("taken_before_crash"),
            F.min(F.when(F.col("at") > F.col("crash_time"), F.col("at"))).alias("again"),
        )
        .where(F.col("taken_before_crash").isNull())
        .groupBy("group", "process", "crash_time")
        .agg(
            F.count(F.lit(1)).alias("held"),
            F.count("again").alias("delivered_again"),
            F.max((F.col("again") - F.col("crash_time")) * ms).alias("max_ms"),
        )
    )
    out: dict[str, Any] = {}
    for r in wait.collect():
        out[r["group"]] = {"wait_for_first_delivery": r.asDict(), "crashes": []}
        del out[r["group"]]["wait_for_first_delivery"]["group"]
    for r in back.orderBy("crash_time").collect():
        entry = out.setdefault(r["group"], {"wait_for_first_delivery": None, "crashes": []})
        entry["crashes"].append(
            {
                "process": r["process"],
                "held": r["held"],
                "delivered_again": r["delivered_again"],
                "redelivered_within_ms": r["max_ms"],
            }  # fmt: skip
        )
    return out


def judge_share(
    spark: SparkSession, history: Path, examples: int | None
) -> tuple[dict[str, tuple[int, list]], dict[str, int], list[str], dict[str, Any]]:
    """({check: (count, examples)}, tallies {undecided, at-limit}, groups without a
    complete share drain, statistics), in a few Spark jobs."""

    t = ShareTables(spark, history)
    try:
        frames, tallies = share_frames(t)
        found = collect_anomalies(frames, examples).get(0, {})
        counts = {r["state"]: r["count"] for r in tallies.collect()}
        incomplete = sorted(
            r["group"]
            for r in t.groups.join(t.drains, "group", "left").collect()
            if not r["complete"]
        )
        return found, counts, incomplete, share_stats(t)
    finally:
        t.release()
