"""Disaster-recovery checks: what MirrorMaker 2 copied, and what a failover cost the group.

Definitions in docs/results.md; the reference twin is testkit/reference_mirror.py.
The lines are read straight from history.jsonl with Spark's JSON reader, as
the share checks do: only mirror runs need them.  A value is *mirrored* when
it was sent to dc1 (a topic without a cluster prefix) and observed on dc2
(``dc2/<topic>``, workloads/cluster_history.py); dc2's *log* is what its final
drain read, dc1's likewise.  The group of dc1 (``g``) is the group
``dc2/g`` after the failover.

- ``mirror-lost``: a value in dc1's log at an offset MirrorMaker says it
  copied (its ``mirror-caught-up`` line), absent from dc2's log.
- ``failover-skip``: a mirrored value in dc2's log below an offset the
  failed-over group read in that partition, never read by the group on either
  cluster: translated offsets must never do this.
- ``failover-reread``: a value the group read on dc1 and again on dc2.
- ``mirror-partition``: a mirrored value placed on dc2 in another partition
  than on dc1.
- ``mirror-order``: a mirrored value placed on dc2 before a value that precedes
  it in their common partition on dc1 and dc2.
- ``mirror-duplicate``: a mirrored value at more than one offset of dc2's log.

The RPO (values acknowledged on dc1 before the failover that dc2 did not
hold when it began, and how many seconds of writes they span) is a
statistic, not a check: a failover under a netsplit loses what was not
copied yet by design.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafka_chaos.checkers import sources
from kafka_chaos.checkers.check import Basis, Check, Context, Findings, always
from kafka_chaos.checkers.collect import Found, collect_anomalies
from kafka_chaos.checkers.frames import anomaly
from kafka_chaos.checkers.spec_view import CheckedSpec
from kafka_chaos.workloads import mirror_spec
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

NS = 1e9
LINE = "index long, time long, process string, type string, f string, value string"
MIRROR_LINES = ("send", "poll", "subscribe", "assign", "failover", "mirror-caught-up")
RECORDS = (
    "final boolean, records array<struct<topic string, partition int, offset long, value long>>"
)
POSITION = "array<struct<topic string, partition int, offset long>>"
PREFIX = "dc2/"


def _on_dc2(col: str) -> F.Column:
    return F.col(col).startswith(PREFIX)


def _base(col: str) -> F.Column:
    """A dc2 name without its prefix."""
    return F.regexp_replace(F.col(col), "^" + PREFIX, "")


class MirrorTables:
    """Sends, reads, group members, the failover and the catch-up of one history."""

    def __init__(self, spark: SparkSession, history: Path) -> None:
        lines = spark.read.schema(LINE).json(str(history)).where(F.col("f").isin(*MIRROR_LINES))
        self.lines = lines.where(F.col("index").isNotNull()).cache()
        sent = F.from_json("value", "topic string, partition int, offset long, value long")
        self.acks = self.lines.where((F.col("f") == "send") & (F.col("type") == "ok")).select(
            sent["value"].alias("val"),
            sent["topic"].alias("topic"),
            sent["partition"].alias("partition"),
            sent["offset"].alias("offset"),
            F.col("time").alias("ack_time"),
            F.col("index").alias("ack_index"),
        )
        # Values sent to dc1, whatever became of the send: only they can be copies.
        self.dc1_values = (
            self.lines.where((F.col("f") == "send") & (F.col("type") == "invoke"))
            .select(sent["value"].alias("val"), sent["topic"].alias("topic"))
            .where(~_on_dc2("topic"))
            .select("val")
            .distinct()
        )
        polled = F.from_json("value", RECORDS)
        self.reads = (
            self.lines.where((F.col("f") == "poll") & (F.col("type") == "ok"))
            .select(
                "index",
                "time",
                "process",
                F.coalesce(polled["final"], F.lit(False)).alias("final"),
                F.explode(polled["records"]).alias("r"),
            )
            .select(
                "index",
                "time",
                "process",
                "final",
                F.col("r.topic").alias("topic"),
                F.col("r.partition").alias("partition"),
                F.col("r.offset").alias("offset"),
                F.col("r.value").alias("val"),
            )  # fmt: skip
            .where(F.col("val").isNotNull())
            .cache()
        )
        joined = F.from_json("value", "group string, final boolean")
        self.members = (
            self.lines.where(F.col("f").isin("subscribe", "assign") & (F.col("type") == "invoke"))
            .where(joined["final"].isNull())
            .groupBy("process")
            .agg(F.first(joined["group"]).alias("group"))
        )
        self.failover_start = self._one("failover", "start")
        self.failover = self._one("failover", "end")
        self.caught_up = self._one("mirror-caught-up", None)
        self.copied = self._copied()

    def _copied(self) -> DataFrame:
        """(topic, partition, upto): MirrorMaker's recorded progress, from every catch-up line."""
        # Entries are [topic, partition, offset] lists: read as strings, then typed.
        progress = F.from_json("value", "copied array<array<string>>")
        c = F.col("c")
        return (
            self.lines.where(F.col("f") == "mirror-caught-up")
            .select(F.explode(progress["copied"]).alias("c"))
            .groupBy(c[0].alias("topic"), c[1].cast("int").alias("partition"))
            .agg(F.max(c[2].cast("long")).alias("upto"))
        )

    def _one(self, f: str, phase: str | None) -> dict[str, Any] | None:
        """The last line of ``f`` (with ``phase``) as a dict with its time, or None."""
        rows = self.lines.where(F.col("f") == f).orderBy(F.col("index").desc()).collect()
        for r in rows:
            value = json.loads(r["value"] or "{}")
            if phase is None or value.get("phase") == phase:
                return {**value, "time": r["time"], "index": r["index"]}
        return None

    def log(self, dc2: bool) -> DataFrame:
        """(val, topic, partition, offset, drain_index) of one cluster's final drain; on dc2
        only copies of dc1's values."""
        cluster = _on_dc2("topic") if dc2 else ~_on_dc2("topic")
        drained = self.reads.where(F.col("final") & cluster)
        rows = drained.select(
            "val", "topic", "partition", "offset", F.col("index").alias("drain_index")
        )
        if dc2:
            rows = rows.join(self.dc1_values, "val", "left_semi")
        return rows.distinct()

    def group_reads(self) -> DataFrame:
        """(val, group, dc2, topic, partition, offset, index, time): reads of group members,
        ``group`` without its cluster prefix."""
        return (
            self.reads.where(~F.col("final"))
            .join(F.broadcast(self.members), "process")
            .select(
                "val",
                _base("group").alias("group"),
                _on_dc2("group").alias("dc2"),
                "topic",
                "partition",
                "offset",
                "index",
                "time",
            )  # fmt: skip
        )

    def release(self) -> None:
        self.reads.unpersist()
        self.lines.unpersist()


def mirror_lost(t: MirrorTables) -> DataFrame:
    dc1 = (
        t.log(dc2=False)
        .join(F.broadcast(t.copied), ["topic", "partition"])
        .where(F.col("offset") <= F.col("upto"))
    )
    dc2 = t.log(dc2=True).select("val").distinct()
    lost = dc1.join(dc2, "val", "left_anti")
    return anomaly(
        lost.select(F.lit(0).alias("hid"), "*"), "mirror-lost", F.col("drain_index"),
        F.col("val").alias("value"), "topic", "partition", "offset", "upto",
        F.array("drain_index").alias("indices"),
    )  # fmt: skip


def failover_skip(t: MirrorTables) -> DataFrame:
    reads = t.group_reads()
    on_dc2 = reads.where("dc2")
    reach = on_dc2.groupBy("group", "topic", "partition").agg(F.max("offset").alias("read_upto"))
    groups = reads.select("group").distinct()
    present = t.log(dc2=True).crossJoin(F.broadcast(groups))
    below = present.join(F.broadcast(reach), ["group", "topic", "partition"]).where(
        F.col("offset") < F.col("read_upto")
    )
    skipped = below.join(reads.select("group", "val").distinct(), ["group", "val"], "left_anti")
    return anomaly(
        skipped.select(F.lit(0).alias("hid"), "*"), "failover-skip", F.col("drain_index"),
        "group", F.col("val").alias("value"), "partition", "offset", "read_upto",
        F.array("drain_index").alias("indices"),
    )  # fmt: skip


def failover_reread(t: MirrorTables) -> DataFrame:
    reads = t.group_reads()
    first = reads.groupBy("group", "val", "dc2").agg(F.min("index").alias("index"))
    both = (
        first.where(~F.col("dc2")).alias("a")
        .join(first.where("dc2").alias("b"), ["group", "val"])
        .select("group", "val", F.col("a.index").alias("dc1_index"),
                F.col("b.index").alias("dc2_index"))
    )  # fmt: skip
    return anomaly(
        both.select(F.lit(0).alias("hid"), "*"), "failover-reread", F.col("dc2_index"),
        "group", F.col("val").alias("value"), F.array("dc1_index", "dc2_index").alias("indices"),
    )  # fmt: skip


def _first_positions(log: DataFrame) -> DataFrame:
    return log.groupBy("val").agg(
        F.min_by(F.struct("topic", "partition", "offset", "drain_index"), F.col("offset")).alias(
            "at"
        )
    )


def mirror_placement(t: MirrorTables) -> tuple[DataFrame, DataFrame]:
    """(mirror-partition, mirror-order): copies moved to another partition, and copies
    placed before their dc1 predecessor within one partition."""
    dc1 = _first_positions(t.log(dc2=False)).select(
        "val", F.col("at.topic").alias("t1"), F.col("at.partition").alias("p1"),
        F.col("at.offset").alias("o1"),
    )  # fmt: skip
    dc2 = _first_positions(t.log(dc2=True)).select(
        "val", F.col("at.partition").alias("p2"), F.col("at.offset").alias("o2"),
        F.col("at.drain_index").alias("drain_index"),
    )  # fmt: skip
    both = dc1.join(dc2, "val")
    w = Window.partitionBy("t1", "p1").orderBy("o1")
    ordered = both.select(
        "*",
        F.lag("p2").over(w).alias("prev_p2"),
        F.lag("o2").over(w).alias("prev_o2"),
        F.lag("val").over(w).alias("prev_val"),
    )
    # Order is compared only where both values kept their partition: a move is
    # mirror-partition's, which the source promises against (order it does not).
    kept = (F.col("p2") == F.col("p1")) & (F.col("prev_p2") == F.col("p2"))
    fields = (
        F.col("val").alias("value"), F.col("p1").alias("dc1_partition"),
        F.col("o1").alias("dc1_offset"), F.col("p2").alias("dc2_partition"),
        F.col("o2").alias("dc2_offset"),
    )  # fmt: skip
    moved = ordered.where(F.col("p2") != F.col("p1"))
    behind = ordered.where(kept & (F.col("prev_o2") > F.col("o2")))
    return (
        anomaly(
            moved.select(F.lit(0).alias("hid"), "*"), "mirror-partition", F.col("drain_index"),
            *fields, F.array("drain_index").alias("indices"),
        ),
        anomaly(
            behind.select(F.lit(0).alias("hid"), "*"), "mirror-order", F.col("drain_index"),
            *fields, F.col("prev_val").alias("after_value"),
            F.array("drain_index").alias("indices"),
        ),
    )  # fmt: skip


def mirror_duplicate(t: MirrorTables) -> DataFrame:
    places = (
        t.log(dc2=True)
        .groupBy("val")
        .agg(
            F.array_sort(F.collect_set(F.struct("partition", "offset"))).alias("positions"),
            F.min("drain_index").alias("drain_index"),
        )
    )
    dup = places.where(F.size("positions") > 1)
    return anomaly(
        dup.select(F.lit(0).alias("hid"), "*"), "mirror-duplicate", F.col("drain_index"),
        F.col("val").alias("value"), "positions", F.array("drain_index").alias("indices"),
    )  # fmt: skip


def rpo(t: MirrorTables) -> dict[str, Any]:
    """What dc2 lacked when the failover began, of what dc1 had acknowledged by then."""
    if t.failover_start is None or t.failover is None:
        return {"failover": False}
    start = int(t.failover_start["time"])
    ends = {int(p): int(e) for _, p, e in t.failover.get("dc2_ends") or []}
    spark = t.lines.sparkSession
    limits = spark.createDataFrame(
        [(p, e) for p, e in ends.items()] or [(-1, -1)], "partition int, dc2_end long"
    )
    acked = t.acks.where(~_on_dc2("topic") & (F.col("ack_time") < start))
    # A partition whose end dc2 did not give at the failover (its broker down) has
    # no measured RPO: its values are counted apart, never guessed either way.
    measured = F.col("partition").isin(list(ends))
    unmeasured = acked.where(~measured).count()
    acked_before = acked.count()
    acked = acked.where(measured)
    dc2 = _first_positions(t.log(dc2=True)).select(
        "val", F.col("at.partition").alias("p2"), F.col("at.offset").alias("o2")
    )
    there = dc2.join(F.broadcast(limits), dc2["p2"] == limits["partition"]).where(
        F.col("o2") < F.col("dc2_end")
    )
    missing = acked.join(there.select("val"), "val", "left_anti")
    later = missing.join(dc2.select("val"), "val", "left_semi").count()
    row = missing.agg(F.count(F.lit(1)).alias("n"), F.min("ack_time").alias("oldest")).first()
    n = int(row["n"] or 0)
    return {
        "failover": True,
        "failover_at_s": round(start / NS, 3),
        "acked_before": acked_before,
        "rpo_values": n,
        "rpo_unmeasured": unmeasured,
        "rpo_seconds": round((start - row["oldest"]) / NS, 3) if n else 0.0,
        "copied_later": later,
        "translated": t.failover.get("groups") or {},
        "translation_error": t.failover.get("error"),
    }


def mirror_frames(t: MirrorTables) -> list[DataFrame]:
    return [mirror_lost(t), failover_skip(t), failover_reread(t), *mirror_placement(t),
            mirror_duplicate(t)]  # fmt: skip


def judge_mirror(
    spark: SparkSession, history: Path, examples: int | None
) -> tuple[dict[str, tuple[int, list]], dict[str, Any]]:
    t = MirrorTables(spark, history)
    try:
        found = collect_anomalies(mirror_frames(t), examples).get(0, {})
        stats = {
            **rpo(t),
            "caught_up": bool((t.caught_up or {}).get("caught_up")),
            "catch_up_s": (t.caught_up or {}).get("waited_s"),
            "mirrored": t.log(dc2=True).select("val").distinct().count(),
            "dc1_log": t.log(dc2=False).select("val").distinct().count(),
        }
        return found, stats
    finally:
        t.release()


def _eos(spec: CheckedSpec) -> bool:
    return bool(mirror_spec.of(spec.spec).exactly_once)


MIRROR_LOST = Check(
    name="mirror-lost",
    family="mirror",
    title="Message not mirrored",
    explanation=(
        "These values are in dc1's log at offsets MirrorMaker 2 said it had copied, yet dc2's log "
        "does not hold them after MirrorMaker caught up: the mirror lost them."
    ),
    finds=(
        "a value in dc1's final drain at an offset up to MirrorMaker's recorded progress of its "
        "partition (the `mirror-caught-up` line), absent from dc2's final drain"
    ),
    severity_doc="error",
    meaning=(
        "dc1 holds this message and MirrorMaker 2 recorded it as copied, but dc2 does not have it:"
        " a failover to dc2 loses it for good."
    ),
    causes=(
        "MirrorMaker committing source offsets for records its producer never wrote (a crash "
        "between the two without exactly-once), dc2 losing acknowledged data, or a truncation on "
        "dc1 after the copy was taken."
    ),
    needs_drain=True,
    basis=Basis(
        promise=sources.SOURCE_OFFSETS,
        source="KIP-618, Motivation: how Kafka Connect, and so MirrorMaker 2, records progress",
        url=sources.KIP_618_URL,
        allows=("values past MirrorMaker's recorded progress (not yet copied)",),
    ),
)

FAILOVER_SKIP = Check(
    name="failover-skip",
    family="mirror",
    title="Message skipped by the failover",
    explanation=(
        "The group never read these mirrored values, on dc1 before the failover or on dc2 after "
        "it, although on dc2 it read beyond them in their partition: the translated offsets "
        "skipped them."
    ),
    finds=(
        "a dc1 value in dc2's final drain, below the highest offset the failed-over group read in "
        "that partition of dc2, that the group never read on either cluster"
    ),
    severity_doc="error",
    meaning=(
        "After the failover the group started reading dc2 past this message, and it had not read "
        "it on dc1 either: the group will never process it."
    ),
    causes=(
        "Offset translation that overshoots (a checkpoint past the group's real position), "
        "offsets applied to the wrong partitions, or a group started at the log end on dc2."
    ),
    basis=Basis(
        promise=sources.TRANSLATED,
        source=(
            "KIP-545, Motivation: MirrorMaker 2's translated offsets (the failover applies the "
            "checkpoints itself, as RemoteClusterUtils.translateOffsets does)"
        ),
        url=sources.KIP_545_URL,
        allows=("values the group read on dc1 before the failover",),
    ),
)

FAILOVER_REREAD = Check(
    name="failover-reread",
    family="mirror",
    title="Message read again after the failover",
    explanation=(
        "The group read these values on dc1 and again on dc2. MirrorMaker 2 translates a "
        "committed offset down to its last offset sync, so a failover re-reads what the group read"
        " since then: at-least-once, as documented."
    ),
    finds="a value read by the group on dc1 and by the same group on dc2",
    severity_doc=(
        "info; warning with exactly-once MirrorMaker (KIP-656 makes the copy exactly-once, not "
        "the group's position: translation still rounds down)"
    ),
    meaning=(
        "The group processed this message twice, once in each data centre. Consumers must be "
        "idempotent across a failover."
    ),
    causes=(
        "Translated offsets round down to the last offset sync (at most `offset.lag.max` records "
        "apart), and checkpoints lag the group's commits by up to the checkpoint interval."
    ),
    severity=lambda spec: "warning" if _eos(spec) else "info",
    basis=Basis(
        promise=sources.TRANSLATED,
        source="KIP-545, Motivation: information only, the KIP allows a few duplicates",
        url=sources.KIP_545_URL,
        allows=(
            "re-reads after a failover, with or without exactly-once: translation rounds down "
            "to the last offset sync",
        ),
    ),
)

MIRROR_PARTITION = Check(
    name="mirror-partition",
    family="mirror",
    title="Mirrored into another partition",
    explanation=(
        "dc2 holds these values in another partition than dc1 does: MirrorMaker 2 documents "
        "that it preserves partitioning, and here it did not."
    ),
    finds="a mirrored value whose first dc2 position is in another partition than on dc1",
    severity_doc="error",
    meaning=(
        "Readers of dc2 find this message in another partition than readers of dc1 did, so "
        "whatever relied on its key's partition (per-key order, one owner per key) breaks."
    ),
    causes="A replication policy or partitioner that remaps partitions.",
    basis=Basis(
        promise=sources.PRESERVES_PARTITIONING,
        source=(
            "Kafka's operations documentation, Geo-Replication, MirrorMaker's features "
            "(Kafka 4.0.0)"
        ),
        url=sources.OPS_URL,
    ),
)

MIRROR_ORDER = Check(
    name="mirror-order",
    family="mirror",
    title="Mirror out of order",
    explanation=(
        "dc2 holds these values before a value that precedes them in their partition on dc1 "
        "(both in the same partition on each cluster): the mirror did not keep dc1's order "
        "within the partition. No MirrorMaker 2 source promises that order, so this is a "
        "warning."
    ),
    finds=(
        "a mirrored value in the same partition on both clusters whose first dc2 position lies "
        "before the first dc2 position of the value preceding it in its dc1 partition (itself "
        "in that partition on dc2)"
    ),
    severity_doc=(
        "warning: MirrorMaker 2's sources promise partitioning (`mirror-partition`), not order "
        "within a partition"
    ),
    meaning=(
        "Readers of dc2 see this partition's messages in another order than readers of dc1 did."
    ),
    causes=(
        "MirrorMaker's producer retrying a batch behind a later one (more than one request in "
        "flight without idempotence), or tasks racing on one partition."
    ),
    severity=always("warning"),
    basis=Basis(
        promise=sources.PRESERVES_PARTITIONING,
        source=(
            "Kafka's operations documentation, Geo-Replication, MirrorMaker's features (Kafka "
            "4.0.0): it promises partitioning; neither it nor KIP-382, KIP-618, Connect's docs "
            "or connect/mirror/README.md promise order within a partition, so this check is "
            "kafka-chaos's own and never an error"
        ),
        url=sources.OPS_URL,
        allows=("copies out of dc1's order within one partition (warning)",),
    ),
)

MIRROR_DUPLICATE = Check(
    name="mirror-duplicate",
    family="mirror",
    title="Message mirrored twice",
    explanation=(
        "dc2 holds these values at more than one offset: MirrorMaker copied them twice. Expected "
        "after a MirrorMaker crash without exactly-once; with exactly-once (KIP-656) it must not."
    ),
    finds="a dc1 value at more than one offset of dc2's final drain",
    severity_doc="info; error with exactly-once MirrorMaker",
    meaning="Readers of dc2 get this message twice.",
    causes=(
        "MirrorMaker restarting from its last committed source offset after a crash or pause "
        "(at-least-once), or exactly-once support that did not fence a zombie task."
    ),
    severity=lambda spec: "error" if _eos(spec) else "info",
    basis=Basis(
        promise=sources.MIRROR_EOS,
        source="Kafka's operations documentation, Geo-Replication, Exactly once (Kafka 4.0.0)",
        url=sources.OPS_URL,
        allows=(
            "copies made twice without exactly-once (info): KIP-618 names Connect's source "
            "offsets at-least-once",
        ),
    ),
)

MIRROR_CHECKS = (
    MIRROR_LOST,
    FAILOVER_SKIP,
    FAILOVER_REREAD,
    MIRROR_PARTITION,
    MIRROR_ORDER,
    MIRROR_DUPLICATE,
)


class MirrorFamily:
    """Two clusters and MirrorMaker 2 between them (``workload: mirror``)."""

    name = "mirror"
    checks = MIRROR_CHECKS

    def applies(self, spec: CheckedSpec) -> bool:
        return True  # brought only by a workload that declares it (workloads/registry.py)

    def frames(self, ctx: Context) -> list[DataFrame]:
        return []

    def findings(self, ctx: Context, found: Found) -> Findings:
        hid = 0 if 0 in ctx.meta else next(iter(ctx.meta))
        names = [c.name for c in self.checks]
        if ctx.history is None:
            reason = "the mirror checks did not run"
            return Findings(
                fields={hid: {n: {"valid": "unknown", "reason": reason} for n in names}}
            )
        judged, stats = judge_mirror(ctx.spark, ctx.history, ctx.examples)
        fields: dict[str, dict[str, Any]] = {n: {"reason": None} for n in names}
        if not stats["caught_up"] and not judged.get(MIRROR_LOST.name, (0, []))[0]:
            fields[MIRROR_LOST.name] = {
                "reason": "MirrorMaker had not caught up: only what it said it copied was judged"
            }
        return Findings(found={hid: judged}, fields={hid: fields}, stats={hid: {"mirror": stats}})


MIRROR = MirrorFamily()
