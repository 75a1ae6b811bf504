"""Consumer-group coverage: double ownership, unowned partitions, commits past unread data.

Ownership is replayed from each member's own lines: ``assign`` sets its
partitions, ``rebalance`` removes ``revoked`` then adds ``assigned``, ``crash``
clears everything.  The state after each line is what counts, so a line that
revokes and re-assigns a partition does not break its ownership.  The final
drain's processes are not group members.
"""

from __future__ import annotations

from kafka_chaos.checkers import hints, sources
from kafka_chaos.checkers.check import Basis, Check
from kafka_chaos.checkers.frames import TP, anomaly
from kafka_chaos.checkers.queue.commit_checks import committed_reads
from kafka_chaos.checkers.queue.queue_tables import QueueTables
from kafka_chaos.checkers.tables import Tables
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

NS = 1e9
KEY = ["hid", "group", "process", "topic", "partition"]
GTP = ["hid", "group", "topic", "partition"]


def _tp(col: str) -> F.Column:
    return F.explode(col).alias("tp")


def ownership_intervals(t: Tables) -> DataFrame:
    """One row per ownership run: KEY + (s_index, s_time, e_index, e_time)."""
    ops = QueueTables.of(t).member_ops
    base = ["hid", "group", "process", "index", "time"]
    rebal = ops.where(F.col("f") == "rebalance")
    gained = rebal.select(*base, _tp("assigned"), F.lit(True).alias("owned"))
    lost = rebal.select(*base, _tp("revoked"), F.lit(False).alias("owned"))
    assigned = ops.where((F.col("f") == "assign") & (F.col("type") == "ok")).select(
        *base, _tp("partitions"), F.lit(True).alias("owned")
    )
    events = (
        gained.unionByName(lost)
        .unionByName(assigned)
        .select(*base, "tp.topic", "tp.partition", "owned")
    )
    touched = events.select(*KEY).distinct()
    clearing = ops.where(
        (F.col("f") == "crash") | ((F.col("f") == "assign") & (F.col("type") == "ok"))
    ).select("hid", "process", "index", "time")
    clears = clearing.join(touched, ["hid", "process"]).withColumn("owned", F.lit(False))
    events = events.unionByName(clears.select(*events.columns))
    state = events.groupBy(*KEY, "index", "time").agg(F.max("owned").alias("owned"))
    w = Window.partitionBy(*KEY).orderBy("index")
    state = state.withColumn("prev", F.coalesce(F.lag("owned").over(w), F.lit(False)))
    changes = state.where(F.col("owned") != F.col("prev"))
    changes = changes.select(
        "*", F.lead("index").over(w).alias("e_index"), F.lead("time").over(w).alias("e_time")
    )
    starts = changes.where("owned").join(t.horizon, "hid")
    return starts.select(
        *KEY,
        F.col("index").alias("s_index"),
        F.col("time").alias("s_time"),
        "e_index",
        F.coalesce("e_time", "end_time").alias("e_time"),
    )


def _in_buckets(intervals: DataFrame, width_ns: int) -> DataFrame:
    """Each interval once per time bucket (``width_ns`` wide) it spans, as ``bucket``."""
    first, last = (F.expr(f"{c} div {width_ns}") for c in ("s_time", "e_time"))
    return intervals.select(
        "*", F.explode(F.sequence(first, F.greatest(first, last))).alias("bucket")
    )


def double_ownership(t: Tables, intervals: DataFrame, grace_s: float) -> DataFrame:
    """Two members owning one partition at once for longer than ``grace_s``.

    A range join: intervals meet only in the time buckets they share, and a
    pair is kept in one bucket only, the one its overlap starts in (both
    span it).  Joining every interval of a partition with every other was
    quadratic: with members replaced after crashes, a 1e7-op transactional
    history has tens of thousands of intervals per partition, and that one
    self-join ran for over 400 s in a single task.
    """
    width_ns = int(max(grace_s, 1.0) * NS)
    a = _in_buckets(intervals, width_ns).alias("a")
    b = _in_buckets(intervals, width_ns).alias("b")
    cond = [F.col(f"a.{c}") == F.col(f"b.{c}") for c in (*GTP, "bucket")] + [
        F.col("a.process") < F.col("b.process")
    ]
    starts_here = F.expr(f"greatest(a.s_time, b.s_time) div {width_ns}") == F.col("a.bucket")
    pairs = (
        a.join(b, cond)
        .where(starts_here)
        .select(
            *[F.col(f"a.{c}").alias(c) for c in GTP],
            F.array("a.process", "b.process").alias("members"),
            F.greatest("a.s_time", "b.s_time").alias("start"),
            F.least("a.e_time", "b.e_time").alias("end"),
            F.array_sort(F.array("a.s_index", "b.s_index")).alias("indices"),
        )
    )
    bad = pairs.where(F.col("end") - F.col("start") > F.lit(grace_s * NS))
    return anomaly(
        bad,
        "group-double-ownership",
        F.col("indices")[1],
        "group",
        "topic",
        "partition",
        "members",
        (F.col("start") / NS).alias("start_s"),
        (F.col("end") / NS).alias("end_s"),
        "indices",
    )


def _liveness(t: Tables) -> DataFrame:
    """(hid, group, process, joined_index, joined_time, crash_index, crash_time) per member.

    A member's part ends at its crash or when it left after a clean close
    (``leave``): a group whose members all left covers nothing any more.
    """
    crashes = (
        t.control.where(F.col("f").isin("crash", "leave"))
        .groupBy("hid", "process")
        .agg(F.min("index").alias("crash_index"), F.min("time").alias("crash_time"))
    )
    return t.keep(t.members.join(crashes, ["hid", "process"], "left"), small=True)


def _universe(t: Tables, intervals: DataFrame) -> DataFrame:
    """(hid, group, topic, partition) the group is meant to cover."""
    subs = QueueTables.of(t).member_ops.where(F.col("f") == "subscribe")
    topics = subs.select("hid", "group", F.explode("topics").alias("topic"))
    topics = topics.unionByName(intervals.select("hid", "group", "topic")).distinct()
    parts = (
        t.partitions.select(*TP)
        .unionByName(intervals.select(*TP))
        .unionByName(QueueTables.of(t).commits.select(*TP))
        .distinct()
    )
    return topics.join(parts, ["hid", "topic"])


def unowned(t: Tables, intervals: DataFrame, threshold_s: float) -> DataFrame:
    live = _liveness(t)
    own = intervals.select(
        *GTP,
        F.col("s_index").alias("index"),
        F.col("s_time").alias("time"),
        F.lit(1).alias("d_own"),
        F.lit(0).alias("d_live"),
    )
    disown = intervals.where(F.col("e_index").isNotNull()).select(
        *GTP, F.col("e_index").alias("index"), "e_time", F.lit(-1), F.lit(0)
    )
    joins = live.select("hid", "group", "joined_index", "joined_time", F.lit(0), F.lit(1))
    leaves = live.where(F.col("crash_index").isNotNull()).select(
        "hid", "group", "crash_index", "crash_time", F.lit(0), F.lit(-1)
    )
    universe = _universe(t, intervals)
    group_events = joins.union(leaves).toDF("hid", "group", "index", "time", "d_own", "d_live")
    events = own.union(disown).union(
        universe.join(group_events, ["hid", "group"]).select(*own.columns)
    )
    per_line = events.groupBy(*GTP, "index", "time").agg(
        F.sum("d_own").alias("d_own"), F.sum("d_live").alias("d_live")
    )
    w = Window.partitionBy(*GTP).orderBy("index")
    acc = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    states = per_line.select(
        *GTP,
        "index",
        "time",
        ((F.sum("d_own").over(acc) == 0) & (F.sum("d_live").over(acc) > 0)).alias("bad"),
    )
    states = states.withColumn("prev", F.coalesce(F.lag("bad").over(w), F.lit(False)))
    changes = states.where(F.col("bad") != F.col("prev"))
    changes = changes.withColumn("next_time", F.lead("time").over(w))
    runs = changes.where("bad").join(t.horizon, "hid")
    runs = runs.withColumn("end", F.coalesce("next_time", "end_time"))
    runs = runs.where(F.col("end") - F.col("time") > F.lit(threshold_s * NS))
    present = live.select(
        "hid", "group", "process", "joined_index", F.col("crash_index").alias("ci")
    )
    at_start = (F.col("joined_index") <= F.col("index")) & (
        F.col("ci").isNull() | (F.col("ci") > F.col("index"))
    )
    runs = (
        runs.join(present, ["hid", "group"], "left")
        .where(at_start)
        .groupBy(*GTP, "index", "time", "end")
        .agg(F.array_sort(F.collect_list("process")).alias("members"))
    )
    return anomaly(
        runs,
        "group-unowned",
        F.col("index"),
        "group",
        "topic",
        "partition",
        "members",
        (F.col("time") / NS).alias("start_s"),
        (F.col("end") / NS).alias("end_s"),
        F.array("index").alias("indices"),
    )


def external_starts(t: Tables, commits: DataFrame) -> DataFrame:
    """(hid, group, topic, partition, start): where someone outside the group put it.

    The committed offset a member found (a ``committed`` read) before any
    member of the group committed that partition: an operator's reset, or a
    failover applying MirrorMaker's translated offsets.  The group owes no
    reads below it in this cluster; whether what lies below was read
    elsewhere is ``failover-skip``'s question.
    """
    first_commit = commits.groupBy(*GTP).agg(F.min("commit_index").alias("first_commit"))
    reads = committed_reads(t).where(F.col("fetched") >= 0)
    early = reads.join(first_commit, GTP, "left").where(
        F.col("first_commit").isNull() | (F.col("read_index") < F.col("first_commit"))
    )
    return early.groupBy(*GTP).agg(F.min_by("fetched", "read_index").alias("start"))


def commit_past_unread(t: Tables) -> DataFrame:
    members = F.broadcast(t.members.select("hid", "process", "group"))
    every = QueueTables.of(t).commits.join(members, ["hid", "process"])
    commits = every.where(F.col("type") == "ok")
    c, first = F.col("committed"), F.col("commit_index")
    top = commits.groupBy(*GTP).agg(
        F.max(c).alias("committed_offset"),
        F.min_by(first, F.struct(-c, first)).alias("commit_index"),
    )
    top = top.join(F.broadcast(t.group_bits), "group")
    top = top.join(F.broadcast(external_starts(t, every)), GTP, "left")
    read = QueueTables.of(t).known_positions.where(F.col("read") == 1)
    unread = read.join(F.broadcast(top), TP).where(
        (F.col("offset") < F.col("committed_offset"))
        & (F.col("offset") >= F.coalesce("start", F.lit(0)))
        & (F.col("readers").bitwiseAND(F.col("bit")) == 0)
    )
    bad = unread.groupBy(*GTP, "committed_offset", "commit_index").agg(
        F.slice(F.array_sort(F.collect_list("offset")), 1, 100).alias("unread_offsets")
    )
    return anomaly(
        bad,
        "group-commit-past-unread",
        F.col("commit_index"),
        "group",
        "topic",
        "partition",
        "committed_offset",
        "unread_offsets",
        F.array("commit_index").alias("indices"),
    )


def group_checks(t: Tables, grace_s: float, unowned_s: float) -> list[DataFrame]:
    intervals = t.keep(ownership_intervals(t), small=True)  # three checks read it
    return [
        double_ownership(t, intervals, grace_s),
        unowned(t, intervals, unowned_s),
        commit_past_unread(t),
    ]


GROUP_DOUBLE_OWNERSHIP = Check(
    name="group-double-ownership",
    family="queue",
    title="Double ownership",
    explanation=(
        "Two live members of one consumer group owned the same partition at the same time for "
        "longer than the grace period."
    ),
    finds=(
        "two members of a group own a partition at once for longer than `checker.ownership_grace_s`"
    ),
    severity_doc="error",
    meaning=(
        "Two members of one consumer group owned the same partition at the same time for longer "
        "than the configured grace period."
    ),
    causes=(
        "A zombie consumer that missed its revocation (session timeout during a network "
        "partition), or a group-coordinator bug."
    ),
    basis=Basis(
        promise=sources.ONE_OWNER,
        source=sources.GROUPS_SOURCE,
        url=sources.CONSUMER_JAVADOC_URL,
        allows=("an overlap no longer than `checker.ownership_grace_s` (a hand-over in flight)",),
    ),
)

GROUP_UNOWNED = Check(
    name="group-unowned",
    family="queue",
    title="Unowned partition",
    explanation=(
        "No member of the group owned this partition for longer than the threshold while the group"
        " had live members: nobody was consuming it."
    ),
    finds=(
        "nobody in the group owns a partition for longer than `checker.unowned_threshold_s` while "
        "the group has live members (joined, and neither crashed nor left)"
    ),
    severity_doc=(
        "error; warning when the run injects faults (a coordinator cut off by a fault leaves "
        "partitions unowned until it heals: lost liveness, not lost data)"
    ),
    meaning=(
        "No member of the group owned this partition for longer than the threshold, so its "
        "messages were not consumed."
    ),
    causes="Slow rebalances, a coordinator that is unreachable, or every member crashed.",
    # A fault that cuts off the group coordinator leaves partitions unowned
    # until it heals: lost liveness, which Kafka never promised to bound, not
    # lost data.  Without faults an ownership gap is a real defect.
    severity=lambda spec: "warning" if spec.faults_planned else "error",
    basis=Basis(
        promise=sources.ONE_OWNER,
        source=(
            sources.GROUPS_SOURCE + "; the time bound, `checker.unowned_threshold_s`, is "
            "kafka-chaos's own: Kafka promises no bound on how long a rebalance takes"
        ),
        url=sources.CONSUMER_JAVADOC_URL,
        allows=(
            "a gap no longer than `checker.unowned_threshold_s`",
            "a gap while the group has no live member",
            "any gap in a run that injects faults: lost liveness, not lost data (warning)",
        ),
    ),
)

GROUP_COMMIT_PAST_UNREAD = Check(
    name="group-commit-past-unread",
    family="queue",
    title="Commit past unread messages",
    explanation=(
        "The group committed an offset past records no member ever polled: those records are "
        "skipped for good (at-least-once broken)."
    ),
    finds=(
        "the group's highest committed offset of a partition lies beyond offsets that someone read"
        " (so they hold data) but no member of the group ever polled; not below a committed "
        "offset a member found before any member committed (an operator's, or a failover's)"
    ),
    severity_doc="error",
    meaning=(
        "The group committed an offset beyond messages no member had read; a restart from that "
        "commit skips them for good (at-most-once delivery)."
    ),
    causes=(
        "Auto-commit committing offsets of records fetched but not yet processed, or a commit "
        "issued after a revocation."
    ),
    basis=Basis(
        promise=sources.ONE_LARGER,
        source=sources.CONSUMER_SOURCE + ": a commit records a member's position",
        url=sources.CONSUMER_JAVADOC_URL,
        allows=(
            "a commit past transaction markers, and under read_committed past aborted records",
            "offsets below a committed offset a member found before any member committed "
            "(an operator's, or a failover's)",
        ),
    ),
    hints=(hints.auto_commit,),
)
