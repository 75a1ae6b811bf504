"""The share-group checks in Spark (definitions: docs/results.md; twin: testkit/reference_share.py).

Share lines are read straight from history.jsonl with Spark's JSON reader:
only share-group runs need them, and the shared ingest stays as it is for
every other run.  The driver collects counts and a few examples, never the
history.  Whether two deliveries fall in one share-partition leader's tenure
comes from checkers/share/share_tenures.py: the few boundary intervals are computed
on the driver (from cluster-state.jsonl and the fault lines) and joined here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka_chaos.checkers.check import Basis, Check, Context, Findings, always
from kafka_chaos.checkers.collect import Found, collect_anomalies
from kafka_chaos.checkers.frames import anomaly
from kafka_chaos.checkers.share import share_tenures
from kafka_chaos.checkers.spec_view import CheckedSpec
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

LINE = "index long, time long, process string, type string, f string, value string, hid long"
BOUNDS = "hid long, topic string, partition int, b_start long, b_end long, why string"
CLUSTER_STATE = "cluster-state.jsonl"
RECORDS = (
    "group string, records array<struct<topic string, partition int, offset long, "
    "value long, delivery_count int>>"
)
ACKS = (
    "group string, acks array<struct<topic string, partition int, offset long, value long, "
    "type string>>, failed array<struct<topic string, partition int>>"
)
REC = ["group", "topic", "partition", "offset"]
# The acknowledgements that end a record's life in the group (release does not).
FINAL_ACKS = ("accept", "reject")
LEADER_CHANGE = "share-redelivered-after-leader-change"
SHARE_LINES = ("share-subscribe", "share-poll", "share-ack", "share-drain", "crash", "send")


class ShareTables:
    """Deliveries, acks with outcomes, crashes, groups and sends of one history."""

    def __init__(
        self, spark: SparkSession, history: Path, cluster_state: Path | None = None
    ) -> None:
        raw = spark.read.schema(LINE).json(str(history)).where(F.col("index").isNotNull())
        raw = raw.withColumn("hid", F.coalesce("hid", F.lit(0)))
        self.lines = raw.where(F.col("f").isin(*SHARE_LINES)).cache()
        self._tenures(spark, raw, cluster_state)
        sub = F.from_json(
            "value", "group string, topics array<string>, lock_ms long, delivery_limit int"
        )
        self.groups = (
            self.lines.where((F.col("f") == "share-subscribe") & (F.col("type") == "ok"))
            .select(
                sub["group"].alias("group"),
                sub["delivery_limit"].alias("limit"),
                sub["lock_ms"].alias("lock_ms"),
                F.explode(sub["topics"]).alias("subscribed"),
            )
            .groupBy("group")
            .agg(
                F.max("limit").alias("limit"),
                F.max("lock_ms").alias("lock_ms"),
                F.collect_set("subscribed").alias("topics"),
            )
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
        sends = self.lines.where((F.col("f") == "send") & (F.col("type") == "ok")).select(
            sent["topic"].alias("topic"),
            sent["partition"].alias("partition"),
            sent["offset"].alias("offset"),
            sent["value"].alias("value"),
            F.col("index").alias("ack_index"),
            F.col("time").alias("ack_time"),
        )
        self.deliveries = self._deliveries().cache()
        self.sends = self._placed(sends)
        self.acks = self._acks().cache()

    def _tenures(self, spark: SparkSession, raw: DataFrame, cluster_state: Path | None) -> None:
        """The share-partitions' tenure boundaries (checkers/share/share_tenures.py), as a
        small frame: fault lines and leadership samples are few, so the driver reads
        them and computes the intervals once."""
        import json

        nemesis = raw.where(F.col("process") == "nemesis").select("hid", "time", "f", "value")
        lines = [{**r.asDict(), "value": json.loads(r["value"] or "null")}
                 for r in nemesis.collect()]  # fmt: skip
        samples = share_tenures.read_samples(cluster_state)
        bounds, sampled = share_tenures.boundaries(samples, share_tenures.faults_from_lines(lines))
        self.bounds = spark.createDataFrame(
            [(b.hid, b.topic, b.partition, b.start, b.end, b.why) for b in bounds], BOUNDS
        )
        self.sampled = spark.createDataFrame(
            [(t, p) for t, p in sorted(sampled)], "topic string, partition int"
        ).withColumn("sampled", F.lit(True))

    def with_change(self, df: DataFrame, first_start: str, second_end: str) -> DataFrame:
        """``df`` (rows with hid, topic, partition) plus ``change``: the text of the tenure
        boundary that could lie between an event that began at ``first_start`` and one that
        ended at ``second_end`` (a real change before a 'not sampled' one, then the
        earliest), or null when both fall in one leader's tenure."""
        keyed = df.join(F.broadcast(self.sampled), ["topic", "partition"], "left")
        b = F.broadcast(self.bounds).alias("b")
        same_key = (
            (F.col("b.topic") == keyed["topic"])
            & (F.col("b.partition") == keyed["partition"])
            & (F.col("b.hid").isNull() | (F.col("b.hid") == keyed["hid"]))
        )
        unsampled = (
            F.col("b.topic").isNull() & (F.col("b.hid") == keyed["hid"]) & keyed["sampled"].isNull()
        )
        between = (F.col("b.b_end") > keyed[first_start]) & (F.col("b.b_start") < keyed[second_end])
        rank = F.struct(
            F.col("b.why").startswith("leadership").cast("int").alias("vague"),
            F.col("b.b_start").alias("start"),
            F.col("b.why").alias("why"),
        )
        return (
            keyed.join(b, (same_key | unsampled) & between, "left")
            .groupBy(*[keyed[c] for c in df.columns])
            .agg(F.min(F.when(F.col("b.why").isNotNull(), rank)).alias("rank"))
            .select(*df.columns, F.col("rank.why").alias("change"))
        )

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

    def _placed(self, sends: DataFrame) -> DataFrame:
        """Sends, each at its offset.  A send acknowledged without one (a batch answered
        DUPLICATE_SEQUENCE_NUMBER: workloads/delivery_offsets.py) takes the offset its
        value was delivered at; never delivered, it matches no ack and stays lost."""
        unplaced = sends.where(F.col("offset").isNull()).drop("offset")
        seen = self.deliveries.groupBy("topic", "partition", "value").agg(
            F.min("offset").alias("offset")
        )
        placed = unplaced.join(seen, ["topic", "partition", "value"], "left")
        return sends.where(F.col("offset").isNotNull()).unionByName(placed)

    def _deliveries(self) -> DataFrame:
        polls = self._paired("share-poll").where(F.col("type") == "ok")
        parsed = F.from_json("value", RECORDS)
        invoked = F.when(F.col("prev_type") == "invoke", F.col("prev_time")).otherwise(
            F.col("time")
        )
        return polls.select(
            "hid",
            parsed["group"].alias("group"),
            F.col("process"),
            invoked.alias("invoke_time"),
            "time",
            "index",
            F.explode(parsed["records"]).alias("r"),
        ).select(
            "hid", "group", "process", "invoke_time", "time", "index",
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


def same_count(t: ShareTables) -> list[DataFrame]:
    """Deliveries that repeat a delivery count of the record, judged by tenure.

    Each acquisition increments the count in the leader's memory, so within one
    tenure a repeat is one acquisition seen twice: to another member an error
    (`share-double-acquire`), to the same member an error once its hold had
    ended (`share-delivery-count-stalled`; before that the client may present
    the same acquisition again).  Across a possible leader change a repeat is
    what KIP-932 allows: `share-redelivered-after-leader-change`, information."""
    d = t.deliveries
    same = Window.partitionBy(*REC, "count").orderBy("time", "index")
    twice = d.select(
        "*",
        F.row_number().over(same).alias("rn"),
        F.first("process").over(same).alias("first_process"),
        F.first("index").over(same).alias("first_index"),
        F.first("invoke_time").over(same).alias("first_invoke"),
        F.first("time").over(same).alias("first_time"),
    ).where(F.col("rn") > 1)
    judged = t.with_change(twice.drop("rn"), "first_invoke", "time").cache()
    fields = [*_place(), F.lit("same delivery count").alias("how"),
              F.col("count").alias("delivery_count"),
              F.array("first_index", "index").alias("indices")]  # fmt: skip
    other = F.col("process") != F.col("first_process")
    within = F.col("change").isNull()
    same_count = anomaly(
        _hid(judged.where(other & within)), "share-double-acquire", F.col("index"), *fields
    )
    # The same member again within one tenure: an error once its hold had ended, by a
    # committed ack it completed before this poll began or by its lock's expiry.
    ended_by_ack = (
        t.acks.where((F.col("outcome") == "committed") & F.col("time").isNotNull())
        .select(
            *REC, "process", F.col("invoke_time").alias("a_invoke"), F.col("time").alias("a_time")
        )  # fmt: skip
        .alias("a")
    )
    mine = judged.where(~other & within).join(t.groups.select("group", "lock_ms"), "group", "left")
    acked = (
        mine.alias("m")
        .join(
            ended_by_ack,
            [F.col(f"m.{c}") == F.col(f"a.{c}") for c in [*REC, "process"]]
            + [
                F.col("a.a_invoke") >= F.col("m.first_time"),
                F.col("a.a_time") < F.col("m.invoke_time"),
            ],  # fmt: skip
            "left",
        )
        .groupBy(*[F.col(f"m.{c}") for c in mine.columns])
        .agg(F.count("a.a_time").alias("acks_between"))
    )
    lapsed = F.col("invoke_time") > F.col("first_time") + F.col("lock_ms") * 1_000_000
    stalled = anomaly(
        _hid(acked.where((F.col("acks_between") > 0) | lapsed)),
        "share-delivery-count-stalled", F.col("index"), *fields,
    )  # fmt: skip
    allowed = anomaly(
        _hid(judged.where(~within)), LEADER_CHANGE, F.col("index"), *_place(),
        F.when(other, "same delivery count, another member")
        .otherwise("same delivery count, same member").alias("how"),
        F.col("count").alias("delivery_count"), F.col("count").alias("earlier_count"),
        F.col("change"), F.array("first_index", "index").alias("indices"),
    )  # fmt: skip
    return [same_count, stalled, allowed]


def double_acquire(t: ShareTables) -> list[DataFrame]:
    """A member's committed ack applied after another member had received the record.

    An error within a tenure and across one alike: a new share-partition leader
    applies an acknowledgement only from the member holding the record, and once
    it has read the share state the old leader's writes are fenced (see
    docs/results.md), so the old holder's ack cannot commit after the record went
    to someone else."""
    d = t.deliveries
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
    return [applied_late]


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


def delivery_count(t: ShareTables) -> list[DataFrame]:
    """A count lower than an earlier delivery's, or above the limit.

    Lower within one tenure is an error (the leader's memory only counts up);
    lower only across possible leader changes is what KIP-932 allows (the new
    leader starts from the last persisted count), reported as information.
    Above the limit is an error whatever the tenure."""
    d = t.deliveries.join(t.groups.select("group", "limit"), "group", "left")
    e = t.deliveries.select(*REC, F.col("time").alias("e_time"), F.col("count").alias("e_count"),
                            F.col("index").alias("e_index"),
                            F.col("invoke_time").alias("e_invoke"))  # fmt: skip
    lower = d.join(e, REC).where(
        (F.col("e_time") < F.col("invoke_time")) & (F.col("e_count") > F.col("count"))
    )
    judged = t.with_change(lower, "e_invoke", "time")
    per_delivery = d.join(
        judged.groupBy(*REC, "index").agg(
            F.max(F.when(F.col("change").isNull(), F.col("e_index"))).alias("e_index"),
            F.max("e_index").alias("any_index"),
            F.max_by("e_count", "e_index").alias("any_count"),
            F.max_by("change", "e_index").alias("change"),
        ),
        [*REC, "index"],
        "left",
    )
    bad = per_delivery.where(F.col("e_index").isNotNull() | (F.col("count") > F.col("limit")))
    backwards = anomaly(
        _hid(bad), "share-delivery-count", F.col("index"), *_place(),
        F.col("count").alias("delivery_count"), F.col("limit").alias("delivery_limit"),
        F.array_compact(F.array("e_index", "index")).alias("indices"),
    )  # fmt: skip
    across = per_delivery.where(
        F.col("e_index").isNull() & F.col("any_index").isNotNull()
        & ~F.coalesce(F.col("count") > F.col("limit"), F.lit(False))
    )  # fmt: skip
    allowed = anomaly(
        _hid(across), LEADER_CHANGE, F.col("index"), *_place(),
        F.lit("lower delivery count").alias("how"), F.col("count").alias("delivery_count"),
        F.col("any_count").alias("earlier_count"), F.col("change"),
        F.array("any_index", "index").alias("indices"),
    )  # fmt: skip
    return [backwards, allowed]


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
    frames = [lost_frame, *same_count(t), *double_acquire(t), *redelivered_after(t),
              *delivery_count(t), missing_redelivery(t)]  # fmt: skip
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
    spark: SparkSession, history: Path, examples: int | None, cluster_state: Path | None = None
) -> tuple[dict[str, tuple[int, list]], dict[str, int], list[str], dict[str, Any]]:
    """({check: (count, examples)}, tallies {undecided, at-limit}, groups without a
    complete share drain, statistics), in a few Spark jobs.  ``cluster_state``: the
    leadership samples, by default ``cluster-state.jsonl`` beside the history."""

    if cluster_state is None:
        cluster_state = Path(history).parent / CLUSTER_STATE
    t = ShareTables(spark, history, cluster_state)
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


# --- what the checks hold Kafka to (docs/results.md, "Share-group checks") ---------
KIP_932 = "KIP-932: Queues for Kafka (Apache Kafka wiki)"
KIP_932_URL = "https://cwiki.apache.org/confluence/display/KAFKA/KIP-932%3A+Queues+for+Kafka"
JAVADOC = 'KafkaShareConsumer javadoc, Kafka 4.4, "Record Delivery and Acknowledgement"'
JAVADOC_URL = (
    "https://kafka.apache.org/44/javadoc/org/apache/kafka/clients/consumer/KafkaShareConsumer.html"
)
KIP_1222 = "KIP-1222 (Apache Kafka wiki), restating KIP-932's acknowledgement types"
KIP_1222_URL = (
    "https://cwiki.apache.org/confluence/display/KAFKA/"
    "KIP-1222:+Acquisition+lock+timeout+renewal+in+share+consumer+explicit+mode"
)
# The transition Available -> Acquired in KIP-932's diagram of a record's states.
COUNTED = "acquired for consumer (delivery count++)"
LOCKED = "While a record is acquired, it is not available for another consumer."
ACK_CHECKED = (
    "it checks that the records being acknowledged are still in the Acquired state and acquired "
    "by the share group member trying to acknowledge them."
)
IMPRECISE = (
    "These updates are not performed with exactly-once semantics, so the delivery count cannot be"
    " relied upon to be precise in all situations."
)
AFTER_CHANGE = (
    "after a possible share-partition leader change (a new leader starts from the last persisted"
    " state): a redelivery with the same or a lower delivery count, to the same or another member"
    " (`share-redelivered-after-leader-change`, information)"
)


SHARE_LOST = Check(
    name="share-lost",
    family="share",
    title="Acknowledged message never accepted by the share group",
    explanation=(
        "The broker acknowledged these sends, yet no member of the share group ever had an accept "
        "or reject of them committed, though their delivery count stayed below the limit and the "
        "group's share drain completed (it went quiet, and outlasted every crashed member's "
        "session): the queue dropped them. Values whose accept or reject has an unknown outcome "
        "are counted apart (undecided)."
    ),
    finds=(
        "An acknowledged send whose record no member ever had an accept or reject of committed, "
        "although its delivery count stayed below the limit and the group's share drain completed:"
        " it went quiet for longer than a lock, and lasted until every crashed member's session "
        "had expired, so no member the coordinator still counted could be holding the record or "
        "its partition. The queue dropped it. Values with an accept or reject of unknown outcome "
        "are counted as `undecided`, and records the broker archived at the limit as "
        "`at_delivery_limit`: neither is lost. A leader change excuses nothing here: whatever the "
        "new leader forgot, it must deliver the record again."
    ),
    severity_doc="error",
    meaning=(
        "The broker acknowledged this message, but no member of the share group ever had an accept"
        " or reject of it committed, although it was delivered fewer times than the group's "
        "delivery limit and the share drain completed (quiet, and past every crashed member's "
        "session): the queue dropped it."
    ),
    causes=(
        "Share-partition state lost or rolled back when its leader moved (a broker kill), "
        "acquisition locks that never expire, or a share-group start offset past the data."
    ),
    basis=Basis(
        promise=(
            "By limiting the duration of the acquisition lock and automatically releasing the "
            "locks, the broker ensures delivery progresses even in the presence of consumer "
            "failures."
        ),
        source=JAVADOC,
        url=JAVADOC_URL,
        allows=(
            "records archived at the delivery limit (`at_delivery_limit`)",
            "an accept or reject of unknown outcome (`undecided`)",
            "a share drain that did not complete (the check is unknown)",
            AFTER_CHANGE,
        ),
    ),
)

SHARE_DOUBLE_ACQUIRE = Check(
    name="share-double-acquire",
    family="share",
    title="Record held by two share-group members at once",
    explanation=(
        "Two members held the same record at once: two deliveries with the same delivery count "
        "to different members within one share-partition leader's tenure (one acquisition handed "
        "out twice), or a member's acknowledgement applied after another member had already "
        "received the record."
    ),
    finds=(
        "Two members held the record at once. Either two deliveries to *different* members carried"
        " the same delivery count with no possible share-partition leader change between them, "
        "so one acquisition was handed out twice (the leader increments the count at every "
        "acquisition), or a member's committed ack of the record was invoked after another "
        "member had already received it. The broker applies an ack only from the member holding "
        "the lock, so the first member still held it when the second got it; this shape is an "
        "error across a leader change too, because the new leader checks the holder and fences "
        "the old leader's state writes."
    ),
    severity_doc="error",
    meaning=(
        "Two members held the same record at the same time: either two deliveries carried the same"
        " delivery count while one share-partition leader was in charge (one acquisition handed "
        "out twice), or one member's acknowledgement was applied after another member had already"
        " received the record."
    ),
    causes="Lock expiry racing an acknowledgement, or a broker-side bookkeeping bug.",
    basis=Basis(
        promise=LOCKED,
        source=f"{JAVADOC}; the same sentence in {KIP_932}",
        url=JAVADOC_URL,
        allows=(
            AFTER_CHANGE,
            "the same member getting its own unacknowledged record again while it may still hold "
            "it (the client presents unacknowledged records again)",
        ),
    ),
)

SHARE_REDELIVERED_AFTER_ACCEPT = Check(
    name="share-redelivered-after-accept",
    family="share",
    title="Record delivered again after it was accepted",
    explanation=(
        "A record was delivered again after a member's accept of it had been committed: the broker"
        " forgot an acknowledgement."
    ),
    finds=(
        "a delivery whose poll began after a committed accept of the record had completed. The "
        "broker forgot a final acknowledgement. A leader change excuses nothing: an accept is "
        "committed only once the share coordinator has written it, and a new leader starts from "
        "what was written."
    ),
    severity_doc="error",
    meaning=(
        "A member's accept of this record was committed, and the record was later delivered again:"
        " the broker forgot the acknowledgement."
    ),
    causes="Acknowledgement state not persisted before a share-partition leader failed over.",
    basis=Basis(
        promise=(
            "ACCEPT - indicates the record was consumed successfully, causing it to be "
            "acknowledged on the server and never re-delivered to other consumers."
        ),
        source=KIP_1222,
        url=KIP_1222_URL,
        allows=("an accept of unknown outcome (its partition failed, or no answer)",),
    ),
)

SHARE_REDELIVERED_AFTER_REJECT = Check(
    name="share-redelivered-after-reject",
    family="share",
    title="Record delivered again after it was rejected",
    explanation=(
        "A record was delivered again after a member's reject (archive) of it had been committed."
    ),
    finds=(
        "a delivery whose poll began after a committed reject of the record had completed. The "
        "broker forgot a final acknowledgement, whatever the leader changes (as for accept)."
    ),
    severity_doc="error",
    meaning=(
        "A member's reject (archive) of this record was committed, and the record was later "
        "delivered again."
    ),
    causes="Acknowledgement state not persisted before a share-partition leader failed over.",
    basis=Basis(
        promise=(
            "REJECT - indicates the record was not consumed successfully, causing it to be "
            "archived on the server and never re-delivered to other consumers."
        ),
        source=KIP_1222,
        url=KIP_1222_URL,
        allows=("a reject of unknown outcome (its partition failed, or no answer)",),
    ),
)

SHARE_DELIVERY_COUNT = Check(
    name="share-delivery-count",
    family="share",
    title="Delivery count went backwards within one leader's tenure, or past the limit",
    explanation=(
        "A record's delivery count went backwards between two deliveries with no possible "
        "share-partition leader change between them, or exceeded the group's delivery limit."
    ),
    finds=(
        "A delivery whose count is lower than that of an earlier delivery that had completed "
        "before its poll began, with no possible share-partition leader change between the two "
        "(the leader's memory only counts up), or a count above the group's limit. Lower only "
        "across a possible change is `share-redelivered-after-leader-change`."
    ),
    severity_doc="error",
    meaning=(
        "Between two deliveries of this record, while one share-partition leader was in charge, "
        "its delivery count decreased; or a delivery carried a count above the group's delivery "
        "limit."
    ),
    causes="A share-partition leader's bookkeeping bug, or a limit not enforced.",
    basis=Basis(
        promise=COUNTED,
        source=f"{KIP_932}, the states of a record",
        url=KIP_932_URL,
        allows=(f"{AFTER_CHANGE}; KIP-932: '{IMPRECISE}'",),
    ),
)

SHARE_DELIVERY_COUNT_STALLED = Check(
    name="share-delivery-count-stalled",
    family="share",
    title="Redelivered to the same member without its delivery count advancing",
    explanation=(
        "The same member got a record again with the same delivery count, within one "
        "share-partition leader's tenure, after its hold of the first delivery had ended (a "
        "committed acknowledgement, or its lock's expiry): a new acquisition the leader did not "
        "count, so the record can be delivered more often than the delivery limit allows."
    ),
    finds=(
        "The *same* member got the record again with the same delivery count, with no possible "
        "share-partition leader change between the two, after its first hold had ended: it had "
        "a committed ack of the record before the second poll began, or the second poll began "
        "more than the lock duration after the first delivery. So the second was a new "
        "acquisition, which the leader must count. Before the hold ended the client may be "
        "presenting the same acquisition again (not reported); after a possible leader change "
        "it is `share-redelivered-after-leader-change`."
    ),
    severity_doc="error",
    meaning=(
        "The same member received this record twice with the same delivery count, while one "
        "share-partition leader was in charge and after its first hold had ended: an acquisition"
        " was not counted, so the record could be delivered more often than the group's delivery"
        " limit allows."
    ),
    causes="A share-partition leader's bookkeeping bug (an acquisition that skips the count).",
    basis=Basis(
        promise=COUNTED,
        source=f"{KIP_932}, the states of a record",
        url=KIP_932_URL,
        allows=(
            AFTER_CHANGE,
            "the client presenting an unacknowledged record again while its lock may still hold "
            "(the javadoc: unacknowledged records 'remain acquired and will be presented to the "
            "application in response to a future poll')",
        ),
    ),
)

SHARE_REDELIVERED_AFTER_LEADER_CHANGE = Check(
    name="share-redelivered-after-leader-change",
    family="share",
    title="Redelivered after a share-partition leader change (allowed)",
    explanation=(
        "A record was delivered again with the same or a lower delivery count, to the same or "
        "another member, and a share-partition leader change may lie between the two deliveries."
        " Kafka keeps acquisitions in the leader's memory only; a new leader starts from the last "
        "persisted state, so the first acquisition and its lock are forgotten. KIP-932 allows it;"
        " each example names the change."
    ),
    finds=(
        "A delivery with the same or a lower count than an earlier delivery of the record where a"
        " tenure boundary could lie between the two acquisitions: a change of the sampled leader "
        "(`cluster-state.jsonl`), a kill or restart of a node that may have led the partition, or"
        " (leadership not recorded) any broker fault. The example's `change` names it."
    ),
    severity_doc="info",
    meaning=(
        "This record was handed out again with the same or a lower delivery count after its "
        "share-partition leader may have changed. The new leader starts from what the old one "
        "persisted, which does not include acquisitions, so the first holder's lock was gone. "
        "Kafka's design allows this: the application must tolerate processing a record twice."
    ),
    causes="A share-partition leader change: a broker kill, restart or failover.",
    severity=always("info"),
    basis=Basis(
        promise="The share-partition leader persists the states and delivery counts. " + IMPRECISE,
        source=(
            f"{KIP_932}; an acquisition is written nowhere in Kafka 4.4.0's SharePartition.java, "
            "so a new leader, which starts from what was persisted, has forgotten it"
        ),
        url=KIP_932_URL,
        allows=(
            "the same delivery count again, to another member, after a possible leader change",
            "the same delivery count again, to the same member, after a possible leader change",
            "a lower delivery count after a possible leader change",
        ),
    ),
)

SHARE_MISSING_REDELIVERY = Check(
    name="share-missing-redelivery",
    family="share",
    title="Released or abandoned record never delivered again",
    explanation=(
        "A record released by a member, or held by one that crashed or never acknowledged it, was "
        "never delivered again although its delivery limit was not reached and the share drain "
        "completed (quiet, and past every crashed member's session)."
    ),
    finds=(
        "The record's last delivery ended without a committed accept or reject: its holder "
        "committed a release, crashed, closed without acking it, or let its lock lapse. Its count "
        "was below the limit, and nobody ever got it again, through a share drain that completed "
        "(quiet for longer than a lock, and past every crashed member's session). A leader change "
        "excuses nothing here."
    ),
    severity_doc="error",
    meaning=(
        "A member released this record, or held it and crashed or never acknowledged it, and no "
        "member ever got it again, although its delivery limit was not reached and the share drain"
        " waited longer than a lock for it, and until every crashed member's session had expired."
    ),
    causes=(
        "Acquisition locks that never expire, or released records lost from the share-partition's "
        "state."
    ),
    basis=Basis(
        promise=(
            "The idea is that the lock is automatically released once the lock duration has "
            "elapsed, and then the record is available to be given to another consumer."
        ),
        source=JAVADOC,
        url=JAVADOC_URL,
        allows=(
            "a record at its delivery limit (archived)",
            "an acknowledgement of unknown outcome after the last delivery",
            "a share drain that did not complete (the check is unknown)",
        ),
    ),
)

SHARE_CHECKS = (
    SHARE_LOST,
    SHARE_DOUBLE_ACQUIRE,
    SHARE_REDELIVERED_AFTER_ACCEPT,
    SHARE_REDELIVERED_AFTER_REJECT,
    SHARE_DELIVERY_COUNT,
    SHARE_DELIVERY_COUNT_STALLED,
    SHARE_MISSING_REDELIVERY,
    SHARE_REDELIVERED_AFTER_LEADER_CHANGE,
)
# Need the whole story: unknown while a group's share drain did not complete.
NEEDS_SHARE_DRAIN = (SHARE_LOST.name, SHARE_MISSING_REDELIVERY.name)


class ShareFamily:
    """Share-group acknowledgements (KIP-932), judged from history.jsonl's share lines.

    Only share-group runs need those lines, so they are read here rather than
    by the shared ingest that every other run pays for."""

    name = "share"
    checks = SHARE_CHECKS

    def applies(self, spec: CheckedSpec) -> bool:
        return spec.share

    def frames(self, ctx: Context) -> list[DataFrame]:
        return []

    def findings(self, ctx: Context, found: Found) -> Findings:
        hid = 0 if 0 in ctx.meta else next(iter(ctx.meta))
        names = [c.name for c in self.checks]
        if ctx.history is None:  # an analysis of rows alone: no lines to judge
            reason = "the share checks did not run"
            unknown = {n: {"valid": "unknown", "reason": reason} for n in names}
            return Findings(fields={hid: unknown})
        judged, tallies, incomplete, share_stats = judge_share(ctx.spark, ctx.history, ctx.examples)
        fields: dict[str, dict[str, Any]] = {}
        for name in names:
            fields[name] = {"reason": None}
            if name in NEEDS_SHARE_DRAIN and incomplete and not judged.get(name, (0, []))[0]:
                reason = f"the share drain of {', '.join(incomplete)} did not complete"
                fields[name] = {"valid": "unknown", "reason": reason}
        fields[SHARE_LOST.name].update(
            undecided=tallies.get("undecided", 0), at_delivery_limit=tallies.get("at-limit", 0)
        )
        return Findings(
            found={hid: judged}, fields={hid: fields}, stats={hid: {"share": share_stats}}
        )


SHARE = ShareFamily()
