"""Derived tables every check family shares, built so big histories stay cheap.

The expensive work of judging a history is a handful of shuffles over its
observations; everything else is small.  So the heavy aggregations are made
once and cached (``per_value``: everything known about one sent value,
``per_position``: everything known about one partition offset), and the small
tables (membership lines, per-partition figures) are cached too, because many
checks read them.  Each check then only filters and joins small or cached data.
A family's own tables live in its package (``checkers.queue.queue_tables``),
over these, reached with ``family``.
Call ``release()`` when done, so a long-lived session (the tests) frees memory.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from kafka_chaos.checkers.frames import (
    BYPASS_PARTIAL_AGGREGATION,
    POLL,
    TP,
    free_checkpoint,
    is_position,
    is_read,
    is_send,
    kind,
    line_rows,
    local_table,
    op_is,
    op_position,
    own_row,
    spark_setting,
    tp_columns,
    tp_key,
)
from kafka_chaos.checkers.ingest.convert import WRITTEN
from kafka_chaos.checkers.ingest.op_codes import ACK, FAIL, INFO, INVOKE, READ
from kafka_chaos.harness.errors import HistoryError
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

Family = TypeVar("Family")

MAX_GROUPS = 63  # consumer groups per history: one bit each in a long


@dataclass
class Tables:
    """Views of one rows table (see checkers/ingest/convert.py): one row per line, one per
    polled record."""

    ops: DataFrame
    # read_committed consumers skip aborted records: an offset known to hold
    # an aborted transaction's value is not one they must read, even if a
    # committed value is known there too (Kafka contradicted itself, which
    # inconsistent-offsets reports; ``QueueTables.known_positions``).
    read_committed: bool = True
    _cached: list[DataFrame] = field(default_factory=list, repr=False)
    _families: dict[type, Any] = field(default_factory=dict, repr=False)

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
            free_checkpoint(df)
        self._cached.clear()
        self._families.clear()

    def family(self, tables: type[Family]) -> Family:
        """A check family's own tables over these (``tables(self)``), made once.

        Why here: every check of a family gets the same ``Tables``, so the
        family's cached tables are shared by its checks as the core ones are,
        while the core knows no family.  They are kept with ``keep`` and go
        with ``release``.
        """
        if tables not in self._families:
            self._families[tables] = tables(self)
        return self._families[tables]

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
    def topic_names(self) -> dict[int, str]:
        """Topic id -> name (rows keep topics as integers: checkers/ingest/topic_ids.py)."""
        names = self.ops.where(kind("topic")).select("topic", "name").collect()
        return {r["topic"]: r["name"] for r in names}

    @cached_property
    def control(self) -> DataFrame:
        """Every line that is neither a send, a poll, a transaction nor an offset
        commit (``QueueTables.commits``): membership, rebalances, seeks, crashes, faults.

        Only the columns a control row can hold (``checkers.ingest.convert.WRITTEN``):
        the others are null in every control row, and caching them cost time.
        (Of those the rows table has: tests build tables of fewer columns.)"""
        held = [name for name in WRITTEN["control"] if name in self.ops.columns]
        return self.keep(self.ops.where(kind("control")).select(*held), small=True)

    @cached_property
    def txn_lines(self) -> DataFrame:
        """A transaction line's own row (invoke or completion, ``f = "txn"``).

        Not cached: about half the lines of a transactional history, read by
        a few checks for a few columns each, straight from their own files."""
        return self.ops.where(kind("txn"))

    @cached_property
    def has_txns(self) -> bool:
        """Whether the history has transaction lines (a quick probe of their own
        Parquet files): without them no row belongs to a transaction."""
        return not self.txn_lines.isEmpty()

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
        txns = self.has_txns
        seen = self.ops.where((is_send() | is_read()) & F.col("val").isNotNull())
        seen = self._with_reader_bit(seen).select(
            "hid", "val", "index", "time", tp_key().alias("tp"), "offset", "bit", "op", "final",
            *([F.col("txn").isNotNull().alias("in_txn"), "txn", "source"] if txns else []),
        )  # fmt: skip

        def of_the(code: int, col: str) -> Column:
            return F.min(F.when(op_is(code), F.col(col)))

        def failed(in_txn: bool) -> Column:
            """Index of a definitely failed send outside transactions, or of an
            aborted transaction's send (``in_txn``): ``failed-write-read``
            judges the first, ``aborted-read`` the second."""
            if not txns:  # every send is outside one
                return F.min(F.when(op_is(FAIL), F.col("index")))
            txn = F.col("in_txn") if in_txn else ~F.col("in_txn")
            return F.min(F.when(op_is(FAIL) & txn, F.col("index")))

        def at_position(col: str) -> Column:
            return F.when(op_position(), F.col(col))

        def spread(col: str) -> Column:
            return F.min(at_position(col)) != F.max(at_position(col))

        done = F.col("op").isin(ACK, FAIL, INFO)
        # Transactions (checkers/txn/txn_checks.py): the sending transaction, its
        # completion's send row (any outcome: ACK, FAIL or INFO), the input
        # a consume-transform-produce send copies.  Only the transactional
        # checks read them, for values with a ``txn``: without transaction
        # lines they are nulls, not seven more aggregates of every row.
        of_txns = {
            "abort_index": failed(in_txn=True),
            "txn": F.min(F.when(done, F.col("txn"))),
            "done_index": F.min(F.when(done, F.col("index"))),
            "done_op": F.min(F.when(done, F.col("op"))),
            "done_tp": F.min(F.when(done, F.col("tp"))),
            "done_offset": F.min(F.when(done, F.col("offset"))),
            "source": F.max(F.when(done, F.col("source"))),
        }
        if not txns:
            types = dict(self.ops.dtypes)
            nulls = {
                "abort_index": "bigint", "txn": types["txn"], "done_index": "bigint",
                "done_op": types["op"], "done_tp": "bigint", "done_offset": types["offset"],
                "source": types["source"],
            }  # fmt: skip
            of_txns = {name: F.lit(None).cast(type_) for name, type_ in nulls.items()}
        per_value = seen.groupBy("hid", "val").agg(
            of_the(INVOKE, "index").alias("invoke_index"),
            of_the(INVOKE, "time").alias("invoke_time"),
            of_the(ACK, "index").alias("ack_index"),
            of_the(ACK, "time").alias("ack_time"),
            of_the(ACK, "tp").alias("ack_tp"),
            of_the(ACK, "offset").alias("offset"),
            failed(in_txn=False).alias("fail_index"),
            of_the(READ, "index").alias("read_index"),
            # The final drain's first read of it: ``acked-lost`` (checkers/queue/loss_checks.py).
            F.min(F.when(op_is(READ) & F.col("final"), F.col("index"))).alias("drain_index"),
            F.min_by("time", F.when(op_is(READ), F.col("index"))).alias("read_time"),
            (spread("tp") | spread("offset")).alias("dup"),
            F.min(at_position("tp")).alias("pos_tp"),
            F.min(at_position("offset")).alias("pos_offset"),
            F.min(at_position("index")).alias("pos_first"),
            F.bit_or("bit").alias("readers"),
            *[agg.alias(name) for name, agg in of_txns.items()],
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
