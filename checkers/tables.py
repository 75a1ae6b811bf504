"""Derived tables every check family shares, built so big histories stay cheap.

The expensive work of judging a history is a handful of shuffles over its
observations; everything else is small.  So the heavy aggregations are made
once and cached (``per_value``: everything known about one sent value,
``per_position``: everything known about one partition offset), and the small
tables (membership lines, per-partition figures) are cached too, because many
checks read them.  Each check then only filters and joins small or cached data.
Call ``release()`` when done, so a long-lived session (the tests) frees memory.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import cached_property, reduce

from kafka_chaos.checkers.ingest.convert import WRITTEN
from kafka_chaos.checkers.ingest.op_codes import ACK, FAIL, INFO, INVOKE, READ, SEND_TYPES
from kafka_chaos.harness.errors import HistoryError
from py4j.protocol import Py4JError
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

TP = ["hid", "topic", "partition"]
POLL = ["hid", "process", "topic", "partition", "index"]  # one poll line's reads of a partition
MAX_GROUPS = 63  # consumer groups per history: one bit each in a long
BYPASS_PARTIAL_AGGREGATION = "spark.sql.execution.bypassPartialAggregation"


def to_json(*cols: Column) -> Column:
    """One example as a JSON string, so examples of every check share one column."""
    return F.to_json(F.struct(*cols))


def anomaly(df: DataFrame, check: str, sort_key: Column, *fields: Column) -> DataFrame:
    """Normalise an anomaly table to (hid, check, k, ex) for the shared collection step."""
    return df.select(
        "hid", F.lit(check).alias("check"), sort_key.alias("k"), to_json(*fields).alias("ex")
    )


@dataclass(frozen=True)
class Branch:
    """One check's anomalies among the rows of a table several checks filter:
    ``anomaly``'s arguments, with the filter (``where``) that picks them."""

    check: str
    where: Column
    sort_key: Column
    fields: tuple[Column | str, ...]


def anomalies(df: DataFrame, *branches: Branch) -> DataFrame:
    """The ``anomaly`` tables of several checks, from one pass over ``df``.

    Why: each check's frame is one branch of the collection job's union, and
    Spark scans its input once per branch.  The checks that filter
    ``Tables.per_value`` scanned its 1e7 rows six times; at 1e7 ops, side by
    side in one session (loaded machine), six filters took 11.0-20.2 s and
    the one pass that tags each row with the checks it fails 1.9-4.4 s.  A
    row a check's filter leaves out (false or null) gives it nothing, so each
    check's rows, keys and examples are those of its own ``anomaly``.
    """
    if len(branches) == 1:
        (b,) = branches
        return anomaly(df.where(b.where), b.check, b.sort_key, *b.fields)
    found = [
        F.when(
            b.where,
            F.struct(
                F.lit(b.check).alias("check"), b.sort_key.alias("k"), to_json(*b.fields).alias("ex")
            ),
        )
        for b in branches
    ]
    hit = reduce(operator.or_, (b.where for b in branches))
    tagged = F.filter(F.array(*found), lambda x: x.isNotNull())
    return df.where(hit).select("hid", F.inline(tagged))


def kind(name: str) -> Column:
    """Rows of one Parquet partition (see checkers/ingest/convert.py): Spark reads only its
    files."""
    return F.col("kind") == name


def line_rows() -> Column:
    """Rows of history lines (not polled records, nor the topic names), and the
    send, poll and commit rows a transaction line gives."""
    return F.col("kind").isin("line", "control", "txn", "commit")


def own_row() -> Column:
    """Among ``line_rows``, true once per history line: a transaction line's own row."""
    return F.col("txn").isNull() | (F.col("f") == "txn")


def is_send(type_: str | None = None) -> Column:
    """A send line; with ``type_`` ("invoke", "ok", ...) only that kind."""
    op = F.col("op")
    return kind("line") & (op < READ if type_ is None else op == SEND_TYPES[type_])


def is_read() -> Column:
    """A polled record (only ``ok`` polls have them)."""
    return kind("record")


def is_position() -> Column:
    """An observation of a value at an offset: a delivery report that carries one
    (``op_position``), or a read."""
    return F.col("kind").isin("line", "record") & op_position()


# A send or read row's kind is one small integer column, ``op``, stored by
# ingest (checkers/ingest/op_codes.py): the big aggregations test it many times per
# row, and one integer comparison is far cheaper than the partition and
# string tests it stands for (per-value at 1e7 ops, side by side: 21-30 s
# with the string tests, 13-15 s with an integer code).


def op_is(code: int) -> Column:
    return F.col("op") == code


def op_position() -> Column:
    """``is_position`` without the file pruning, for tables derived from the rows.

    A delivery report names the record at its offset whatever became of the
    send afterwards: an aborted or unknown-outcome transaction's record still
    occupies it (Jepsen's version order leaves such a report out unless a
    read proves the transaction committed; docs/results.md, "Delivery
    reports place records", says why this differs).  Only acks and reads
    prove that the offset holds committed data (``Tables._committed``).
    """
    return op_is(READ) | (F.col("op").isin(ACK, FAIL, INFO) & (F.col("offset") >= 0))


# The per-value aggregation keeps a value's (topic, partition) as one long
# (topic in the high half, partition + 2^31 in the low half: exact for every
# int32 partition): one min/max pair and one "of the ack" slot instead of
# two.  At 1e7 ops, side by side, warm: 9.2 s with two ints, 7.5 s with one long.
_PARTITION_BIAS = 1 << 31


def tp_key() -> Column:
    """(topic, partition) packed into one long; null if either is."""
    low = F.col("partition").cast("long") + F.lit(_PARTITION_BIAS)
    return F.shiftleft(F.col("topic").cast("long"), 32) + low


def tp_columns(key: str, topic: str, partition: str) -> list[Column]:
    """``tp_key`` column ``key`` unpacked into int columns ``topic`` and ``partition``."""
    low = F.col(key).bitwiseAND(F.lit(0xFFFFFFFF)) - F.lit(_PARTITION_BIAS)
    return [
        F.shiftright(F.col(key), 32).cast("int").alias(topic),
        low.cast("int").alias(partition),
    ]


def local_table(spark: SparkSession, rows: list[tuple], schema: str) -> DataFrame:
    """``rows`` as a DataFrame of ``schema`` ("name type, ..."), made in the JVM.

    ``spark.createDataFrame`` of a Python list runs its first task in Python
    worker processes, and starting them cost about 1 s of every check (the
    consumer-group bits at 1e7 ops).  Here each column is one array literal,
    zipped and exploded into rows by Spark itself.
    """
    fields = [field.split() for field in schema.split(",")]
    names = [name for name, _ in fields]
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(fields)
    arrays = [
        F.lit(list(values)).cast(f"array<{type_}>")
        for values, (_, type_) in zip(columns, fields, strict=True)
    ]
    return spark.range(1).select(F.inline(F.arrays_zip(*arrays))).toDF(*names)


def _free_checkpoint(df: DataFrame) -> None:
    """Drop a local checkpoint's blocks (a classic session; Spark Connect's server drops
    them itself once the client lets go of the frame)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return
    try:
        jdf.queryExecution().analyzed().rdd().unpersist(False)
    except Py4JError:  # not a checkpoint's plan: nothing of ours to free
        return


@contextmanager
def spark_setting(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """``key`` set to ``value`` while a plan is made (a cached table's plan is fixed
    when it is persisted), then put back."""
    old = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)


@dataclass
class Tables:
    """Views of one rows table (see checkers/ingest/convert.py): one row per line, one per
    polled record."""

    ops: DataFrame
    # read_committed consumers skip aborted records: an offset known to hold
    # an aborted transaction's value is not one they must read, even if a
    # committed value is known there too (Kafka contradicted itself, which
    # inconsistent-offsets reports; ``known_positions``).
    read_committed: bool = True
    _cached: list[DataFrame] = field(default_factory=list, repr=False)

    def keep(self, df: DataFrame, small: bool = False, distinct_keys: bool = False) -> DataFrame:
        """``df`` computed once, now, for the checks that read it, until ``release()``.

        A local checkpoint, not a cache: the frame returned is a leaf over the
        computed rows, so every plan built on it stays small.  With ``persist``
        each check's plan carried every kept table's whole lineage, and on a
        small history the driver's analysis and planning of those trees, not
        the tasks, were most of the check: warm, side by side on a 121k-line
        run, 27.1-30.9 s against 36.2-43.7 s, the same checks found.
        A ``small`` table is gathered into one partition first: the checks
        over it then run one task per stage instead of one per input split,
        which is most of their cost.  ``distinct_keys``: ``df`` is a grouping
        whose keys are nearly all distinct within an input split, so Spark's
        partial (pre-shuffle) aggregation only costs time and is skipped; the
        setting holds while the table is computed.
        """
        if small:
            df = df.repartition(1)
        bypass = BYPASS_PARTIAL_AGGREGATION, "true"
        with spark_setting(df.sparkSession, *bypass) if distinct_keys else nullcontext():
            kept = df.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)
        self._cached.append(kept)
        return kept

    def release(self) -> None:
        """Free the kept tables now: a warm engine judges many histories."""
        for df in self._cached:
            _free_checkpoint(df)
        self._cached.clear()

    # -- plain views (filters of the rows table) --------------------------------------

    @cached_property
    def reads(self) -> DataFrame:
        """One row per polled record: (index, j) orders reads within a process."""
        return self.ops.where(is_read()).select(
            "hid", "index", "j", "time", "process", "final", "topic", "partition", "offset", "val"
        )

    @cached_property
    def polls(self) -> DataFrame:
        """One row per (poll line, partition) read, cached: the read-order checks
        need only these.  Ingest made them (``kind=poll``,
        checkers/ingest/poll_positions.py): the first and last offset (a
        transaction's polls count as one).  The pairs inside a poll that is
        not one straight run are the record rows' (``prev_offset``).
        """
        rows = self.ops.where(kind("poll")).select(
            *POLL,
            F.col("first_offset").alias("first"),
            F.col("last_offset").alias("last"),
        )
        return self.keep(rows)

    @cached_property
    def positions(self) -> DataFrame:
        """Every observation of a value at an offset: delivery reports (with offsets)
        and reads; ``ack``: an acknowledged send's, ``read``: a polled record's."""
        return self.ops.where(is_position()).select(
            *TP,
            "offset",
            "val",
            "index",
            "process",
            (F.col("op") == ACK).alias("ack"),
            (F.col("op") == READ).alias("read"),
        )

    # -- small cached tables ----------------------------------------------------------

    @cached_property
    def committed_positions(self) -> DataFrame:
        """The offsets a read_committed consumer (the final drain, always) must read.

        Not those whose only known values are from aborted transactions (read
        by someone, which ``aborted-read`` judges); markers are never known.
        In a read_uncommitted run, a read proves nothing about a commit (the
        consumers read open transactions' records too, which may abort), so
        only acknowledged offsets count.
        """
        return self.per_position.where(self._committed())

    def _committed(self) -> Column:
        """On ``per_position``: whether the offset is one of ``committed_positions``.

        An offset known only from an unknown-outcome transaction's delivery
        report may hold an aborted record, so only an ack or a read makes it one.
        """
        committed = ~F.col("aborted")
        if not self.read_committed:
            return committed & F.col("acked")
        return committed & (F.col("acked") | (F.col("read") == 1))

    @cached_property
    def next_positions(self) -> DataFrame:
        """(hid, topic, partition, offset, marker, next_any, next_committed): each
        known offset with the next known offset above it (``per_position``), and
        the next of ``committed_positions`` above it.

        Also a ``marker`` row at o - 1 for each seek to an offset o >= 0 (where
        a read after the seek starts from: ``checkers.queue.poll_checks``), with the
        known offsets above it likewise; markers are never anyone's next
        (without seeks the rows and values are exactly the known offsets').

        One ordered pass that every skip check shares (``checkers.queue.poll_checks.skipping``):
        each check made its own before, and at 1e7 transactional ops those
        three passes took 15-18 s each.
        """
        known = self.per_position.select(
            *TP, "offset", F.lit(False).alias("marker"), self._committed().alias("committed")
        )
        seeks = self.control.where(~F.col("nemesis") & (F.col("f") == "seek"))
        seeks = seeks.select("hid", F.explode("offsets").alias("o")).where(F.col("o.offset") >= 0)
        markers = seeks.select(
            "hid",
            F.col("o.topic").alias("topic"),
            F.col("o.partition").alias("partition"),
            (F.col("o.offset") - 1).alias("offset"),
        ).distinct()
        rows = known.unionByName(
            markers.select("*", F.lit(True).alias("marker"), F.lit(False).alias("committed"))
        )
        # A marker comes before the known offset it sits on: that is not above it.
        w = Window.partitionBy(*TP).orderBy(F.col("offset").desc(), F.col("marker").desc())
        above = w.rowsBetween(Window.unboundedPreceding, -1)

        def nearest(cond: Column) -> Column:
            return F.last(F.when(cond, F.col("offset")), ignorenulls=True).over(above)

        return self.keep(
            rows.select(
                *TP,
                "offset",
                "marker",
                nearest(~F.col("marker")).alias("next_any"),
                nearest(F.col("committed")).alias("next_committed"),
            )
        )

    @cached_property
    def known_positions(self) -> DataFrame:
        """The offsets the run's consumers must read: ``committed_positions`` under
        read_committed, every known one under read_uncommitted.  (The final
        drain reads committed data whatever the run's isolation level.)"""
        return self.committed_positions if self.read_committed else self.per_position

    @cached_property
    def topic_names(self) -> dict[int, str]:
        """Topic id -> name (rows keep topics as integers: checkers/ingest/topic_ids.py)."""
        names = self.ops.where(kind("topic")).select("topic", "name").collect()
        return {r["topic"]: r["name"] for r in names}

    @cached_property
    def control(self) -> DataFrame:
        """Every line that is neither a send, a poll, a transaction nor an offset
        commit (``commits``): membership, rebalances, seeks, crashes, faults.

        Only the columns a control row can hold (``checkers.ingest.convert.WRITTEN``):
        the others are null in every control row, and caching them cost time.
        (Of those the rows table has: tests build tables of fewer columns.)"""
        held = [name for name in WRITTEN["control"] if name in self.ops.columns]
        return self.keep(self.ops.where(kind("control")).select(*held), small=True)

    @cached_property
    def commits(self) -> DataFrame:
        """(hid, process, type, in_txn, topic, partition, committed, commit_index):
        for each process, outcome (``type``) and partition its offset commits
        name, the highest offset committed and the first line that committed it;
        ``in_txn``: committed inside a transaction.

        The checks want only each partition's highest commit, and a
        transactional history commits once per transaction (1.8e6 lines at
        1e7 transactional ops), so one aggregation over every core makes the
        small table they read, instead of a cache of every commit line.
        """
        lines = self.ops.where(kind("commit"))
        named = lines.select(
            "hid",
            "process",
            "type",
            F.col("txn").isNotNull().alias("in_txn"),
            "index",
            F.explode("offsets").alias("o"),
        )
        offset = F.col("o.offset")
        by_partition = named.groupBy(
            "hid",
            "process",
            "type",
            "in_txn",
            F.col("o.topic").alias("topic"),
            F.col("o.partition").alias("partition"),
        ).agg(
            F.max(offset).alias("committed"),
            F.min_by("index", F.struct(-offset, F.col("index"))).alias("commit_index"),
        )
        return self.keep(by_partition, small=True)

    @cached_property
    def txn_lines(self) -> DataFrame:
        """A transaction line's own row (invoke or completion, ``f = "txn"``).

        Not cached: about half the lines of a transactional history, read by
        a few checks for a few columns each, straight from their own files."""
        return self.ops.where(kind("txn"))

    @cached_property
    def drain_processes(self) -> DataFrame:
        """Processes of the final drain: they are not members of any group."""
        polls = self.ops.where(kind("line") & (F.col("f") == "poll") & F.col("final"))
        return self.keep(polls.select("hid", "process").distinct(), small=True)

    @cached_property
    def members(self) -> DataFrame:
        """(hid, process, group, joined_index, joined_time) for group consumers."""
        joins = self.control.where(
            F.col("f").isin("subscribe", "assign") & F.col("group").isNotNull()
        )
        joins = joins.join(F.broadcast(self.drain_processes), ["hid", "process"], "left_anti")
        return self.keep(
            joins.groupBy("hid", "process").agg(
                F.min_by("group", "index").alias("group"),
                F.min("index").alias("joined_index"),
                F.min("time").alias("joined_time"),
            ),
            small=True,
        )

    @cached_property
    def member_ops(self) -> DataFrame:
        """Group members' lines that change what they own or name their topics
        (rebalances, completed assigns, crashes, subscribes), each with the
        member's group: all the group checks replay (checkers/queue/group_checks.py).

        Not seeks nor assign invokes, and none of the columns they alone
        hold: at 1e7 transactional ops those were 0.5e6 of the 0.9e6
        control lines, and caching every control line of members (with its
        list columns) took 11 s in one task.
        """
        owning = F.col("f").isin("rebalance", "crash", "subscribe") | (
            (F.col("f") == "assign") & (F.col("type") == "ok")
        )
        ops = self.control.where(~F.col("nemesis") & owning).select(
            "hid", "process", "index", "time", "f", "type",
            "assigned", "revoked", "partitions", "topics",
        )  # fmt: skip
        groups = F.broadcast(self.members.select("hid", "process", "group"))
        return self.keep(ops.join(groups, ["hid", "process"]), small=True)

    @cached_property
    def per_second(self) -> DataFrame:
        """(hid, t): per second of each history (``time`` floored), what ``meta`` sums
        up of its lines, and the sends and polled records the throughput
        timeline counts (``counted``: how many; ``acked``, ``failed``, ``info``,
        ``polled``: of which kind; checkers/availability/statistics.py).

        One pass over the lines and records for both: they were two scans of
        the history's rows, and at 1e7 ops each read 1e7-2e7 of them.
        """
        line = line_rows()
        counted = (is_send() & (F.col("op") != INVOKE)) | is_read()

        def count(cond: Column) -> Column:
            return F.count(F.when(cond, 1))

        rows = self.ops.where(line | is_read())
        second = F.floor(F.col("time") / F.lit(10**9)).cast("long").alias("t")
        return self.keep(
            rows.groupBy("hid", second).agg(
                count(line).alias("lines"),
                count(line & own_row()).alias("ops"),
                F.max(F.when(line, F.col("time"))).alias("end_time"),
                F.max(F.when(line, F.col("index"))).alias("end_index"),
                F.max(F.when(line, F.col("final").cast("int"))).alias("final"),
                F.min(F.when(line & F.col("final"), F.col("time"))).alias("drain_start"),
                count(line & op_is(ACK)).alias("acked_sends"),
                count(counted).alias("counted"),
                count(counted & op_is(ACK)).alias("acked"),
                count(counted & op_is(FAIL)).alias("failed"),
                count(counted & op_is(INFO)).alias("info"),
                count(counted & op_is(READ)).alias("polled"),
            ),
            small=True,
        )

    @cached_property
    def meta(self) -> DataFrame:
        """Per history: line count, end time/index, whether and when a final drain ran,
        and how many sends were acked (from ``per_second``)."""
        lines = self.per_second.where(F.col("lines") > 0)
        return self.keep(
            lines.groupBy("hid").agg(
                F.sum("ops").alias("ops"),
                F.max("end_time").alias("end_time"),
                F.max("end_index").alias("end_index"),
                F.coalesce(F.max("final"), F.lit(0)).alias("final"),
                F.min("drain_start").alias("drain_start"),
                F.sum("acked_sends").alias("acked_sends"),
            ),
            small=True,
        )

    @cached_property
    def evidence(self) -> DataFrame:
        """``meta`` plus what a verdict rests on (``checkers.results.evidence_gaps``):
        offsets read, faults started and faults that failed to take effect.

        Made of small cached tables only (``meta``, ``control``, ``partitions``),
        so it is one cheap job: nothing here scans the history again.
        """
        # A fault whose start failed says so on its start line; one whose
        # apply failed after the start line was written, on its end line.
        lines = self.control.where(F.col("nemesis") & F.col("fault_id").isNotNull())
        faults = lines.groupBy("hid").agg(
            F.countDistinct(F.when(F.col("phase") == "start", F.col("fault_id"))).alias("faults"),
            F.countDistinct(F.when(F.col("error").isNotNull(), F.col("fault_id"))).alias(
                "failed_faults"
            ),
        )
        reads = self.partitions.groupBy("hid").agg(
            F.sum("read_offsets").cast("long").alias("read_offsets")
        )
        zero = F.lit(0).cast("long")
        return (
            self.meta.join(faults, "hid", "left")
            .join(reads, "hid", "left")
            .select(
                *self.meta.columns,
                F.coalesce("read_offsets", zero).alias("read_offsets"),
                F.coalesce("faults", zero).alias("faults"),
                F.coalesce("failed_faults", zero).alias("failed_faults"),
            )
        )

    @cached_property
    def horizon(self) -> DataFrame:
        """(hid, end_time, end_index): the last moment of each history."""
        return self.meta.select("hid", "end_time", "end_index")

    @cached_property
    def partitions(self) -> DataFrame:
        """(hid, topic, partition, max_read, read_offsets): every partition that holds
        a known value, its highest offset read and how many of its offsets were read.

        From the cached ``per_position`` (one row per offset), not from every
        observation: at 1e7 ops that scan of 1.8e7 rows took 1.2 s.
        """
        return self.keep(
            self.per_position.groupBy(*TP).agg(
                F.max(F.when(F.col("read") == 1, F.col("offset"))).alias("max_read"),
                F.count(F.when(F.col("read") == 1, 1)).alias("read_offsets"),
            ),
            small=True,
        )

    # -- the two big aggregations -----------------------------------------------------

    @cached_property
    def reader_bits(self) -> DataFrame:
        """(hid, process, bit): the group bit (``group_bits``) of each group member."""
        bits = self.members.join(F.broadcast(self.group_bits), "group")
        return self.keep(bits.select("hid", "process", "bit"), small=True)

    def _with_reader_bit(self, rows: DataFrame) -> DataFrame:
        """``rows`` plus ``bit``: the reading member's group bit, 0 for anything else."""
        rows = rows.join(F.broadcast(self.reader_bits), ["hid", "process"], "left")
        return rows.withColumn("bit", F.when(op_is(READ), F.coalesce("bit", F.lit(0))).otherwise(0))

    @cached_property
    def per_value(self) -> DataFrame:
        """Everything about one sent value, in one shuffle of its sends and reads.

        Only primitive min/max aggregates, because they are what Spark
        aggregates fastest, and (topic, partition) as one long (``tp_key``).
        A value is sent once (docs/results.md), so its
        invoke and its completion are single rows: ``min(when(ok, x))`` is x
        of the ack.  Only the first read needs ``min_by(x, when(cond,
        index))``, x at the earliest line meeting cond.  A value seen at two
        places has two distinct positions, so some component's min and max
        differ (``dup``); otherwise ``pos_*`` is the one place it was seen
        (``pos_tp``: its topic and partition, packed).

        It skips Spark's partial (pre-shuffle) aggregation: nearly every key
        is new to a split, so that step only halved the rows at the cost of a
        16-buffer hash map (and its garbage) per row.  Alone at 1e7 ops, side
        by side: 20.1/16.4 s with it, 17.6/12.3 s without.  Only here: for the
        whole session it cost 3 s (60.8 s against 57.8 s), as grouping polled
        records by poll line (``polls``) needs the partial step.
        """
        seen = self.ops.where((is_send() | is_read()) & F.col("val").isNotNull())
        seen = self._with_reader_bit(seen).select(
            "hid", "val", "index", "time", tp_key().alias("tp"), "offset", "bit", "op",
            F.col("txn").isNotNull().alias("in_txn"), "txn", "source", "final",
        )  # fmt: skip

        def of_the(code: int, col: str) -> Column:
            return F.min(F.when(op_is(code), F.col(col)))

        def failed(in_txn: bool) -> Column:
            """Index of a definitely failed send outside transactions, or of an
            aborted transaction's send (``in_txn``): ``failed-write-read``
            judges the first, ``aborted-read`` the second."""
            txn = F.col("in_txn") if in_txn else ~F.col("in_txn")
            return F.min(F.when(op_is(FAIL) & txn, F.col("index")))

        def at_position(col: str) -> Column:
            return F.when(op_position(), F.col(col))

        def spread(col: str) -> Column:
            return F.min(at_position(col)) != F.max(at_position(col))

        done = F.col("op").isin(ACK, FAIL, INFO)
        per_value = seen.groupBy("hid", "val").agg(
            of_the(INVOKE, "index").alias("invoke_index"),
            of_the(INVOKE, "time").alias("invoke_time"),
            of_the(ACK, "index").alias("ack_index"),
            of_the(ACK, "time").alias("ack_time"),
            of_the(ACK, "tp").alias("ack_tp"),
            of_the(ACK, "offset").alias("offset"),
            failed(in_txn=False).alias("fail_index"),
            failed(in_txn=True).alias("abort_index"),
            of_the(READ, "index").alias("read_index"),
            # The final drain's first read of it: ``acked-lost`` (checkers/queue/loss_checks.py).
            F.min(F.when(op_is(READ) & F.col("final"), F.col("index"))).alias("drain_index"),
            F.min_by("time", F.when(op_is(READ), F.col("index"))).alias("read_time"),
            (spread("tp") | spread("offset")).alias("dup"),
            F.min(at_position("tp")).alias("pos_tp"),
            F.min(at_position("offset")).alias("pos_offset"),
            F.min(at_position("index")).alias("pos_first"),
            F.bit_or("bit").alias("readers"),
            # Transactions (checkers/txn/txn_checks.py): the sending transaction, its
            # completion's send row (any outcome: ACK, FAIL or INFO), the input
            # a consume-transform-produce send copies.
            F.min(F.when(done, F.col("txn"))).alias("txn"),
            F.min(F.when(done, F.col("index"))).alias("done_index"),
            F.min(F.when(done, F.col("op"))).alias("done_op"),
            F.min(F.when(done, F.col("tp"))).alias("done_tp"),
            F.min(F.when(done, F.col("offset"))).alias("done_offset"),
            F.max(F.when(done, F.col("source"))).alias("source"),
        )
        return self.keep(
            per_value.select(
                "hid",
                "val",
                "invoke_index",
                "invoke_time",
                "ack_index",
                "ack_time",
                *tp_columns("ack_tp", "topic", "partition"),
                "offset",
                "fail_index",
                "abort_index",
                "read_index",
                "read_time",
                "drain_index",
                "dup",
                "pos_tp",  # per_position groups by it: one key column, not two
                "pos_offset",
                "pos_first",
                "readers",
                "txn",
                "done_index",
                "done_op",
                *tp_columns("done_tp", "done_topic", "done_partition"),
                "done_offset",
                "source",
            ),
            distinct_keys=True,
        )

    @cached_property
    def group_bits(self) -> DataFrame:
        """(group, bit): one bit per consumer group, so "which groups read it" is a bit_or."""
        names = sorted(r["group"] for r in self.members.select("group").distinct().collect())
        if len(names) > MAX_GROUPS:
            raise HistoryError(f"{len(names)} consumer groups; the checkers handle {MAX_GROUPS}")
        spark = self.ops.sparkSession
        return local_table(
            spark, [(g, 1 << i) for i, g in enumerate(names)], "group string, bit long"
        )

    @cached_property
    def per_position(self) -> DataFrame:
        """Everything about one partition offset: the values seen there, who read it.

        ``readers`` has the bit (``group_bits``) of every consumer group whose
        members read the offset.  Built from ``per_value``, a third the size of
        the observations: a value seen in one place stands for all its
        observations.  Only values seen in two places, and reads of null
        values (which ``per_value`` does not hold), come from the rows, and
        the rows are scanned only when there are any (two quick probes; most
        histories have neither, and the scan was 4 of 7 s at 1e7 ops).
        ``aborted``: a value seen there was sent by an aborted transaction;
        ``acked``: an ack names it.
        """
        single = self.per_value.where(~F.col("dup") & F.col("pos_offset").isNotNull()).select(
            "hid",
            F.col("pos_tp").alias("tp"),
            F.col("pos_offset").alias("offset"),
            "val",
            F.col("pos_first").alias("first"),
            F.col("read_index").isNotNull().cast("int").alias("read"),
            "readers",
            F.col("abort_index").isNotNull().alias("aborted"),
            F.col("ack_index").isNotNull().alias("acked"),
        )
        dups = self.per_value.where("dup").select(
            "hid", "val", F.col("abort_index").isNotNull().alias("aborted")
        )
        null_reads = self.ops.where(is_read() & F.col("val").isNull())
        if dups.isEmpty() and null_reads.isEmpty():
            return self.keep(self._by_position(single), distinct_keys=True)
        rows = (
            self.ops.where(is_position())
            .join(F.broadcast(dups), ["hid", "val"])
            .unionByName(null_reads.withColumn("aborted", F.lit(False)))
        )
        several = self._with_reader_bit(rows).select(
            "hid",
            tp_key().alias("tp"),
            "offset",
            "val",
            F.when(F.col("val").isNotNull(), F.col("index")).alias("first"),
            is_read().cast("int").alias("read"),
            F.col("bit").alias("readers"),
            "aborted",
            op_is(ACK).alias("acked"),
        )
        return self.keep(self._by_position(single.unionByName(several)), distinct_keys=True)

    @staticmethod
    def _by_position(seen: DataFrame) -> DataFrame:
        """Grouped by (hid, packed topic and partition, offset): three key columns
        instead of four (at 1e7 ops, warm: 2.6-3.4 s -> 1.9-2.4 s)."""
        by_position = seen.groupBy("hid", "tp", "offset").agg(
            F.min("val").alias("v_lo"),
            F.max("val").alias("v_hi"),
            F.min("first").alias("first"),
            F.max("read").alias("read"),
            F.bit_or("readers").alias("readers"),
            F.max("aborted").alias("aborted"),
            F.max("acked").alias("acked"),
        )
        return by_position.select(
            "hid", *tp_columns("tp", "topic", "partition"), "offset", *by_position.columns[3:]
        )
