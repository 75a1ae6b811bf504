"""The queue family's own tables: offset commits, group membership changes, and
the offsets a consumer must read, over the shared ``Tables``.

Only the queue checks (checkers/queue/) and the transactional ones built on
them read these, so they are made here, not on the core every family shares;
``QueueTables.of(t)`` gives the one instance per ``Tables``, kept and released
with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from kafka_chaos.checkers.frames import TP, kind
from kafka_chaos.checkers.tables import Tables
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F


@dataclass(eq=False)
class QueueTables:
    """Tables of consumer groups' commits and ownership, and of the offsets to read."""

    t: Tables

    @classmethod
    def of(cls, t: Tables) -> QueueTables:
        """The queue tables over ``t``, made once per ``t``."""
        return t.family(cls)

    @cached_property
    def committed_positions(self) -> DataFrame:
        """The offsets a read_committed consumer (the final drain, always) must read.

        Not those whose only known values are from aborted transactions (read
        by someone, which ``aborted-read`` judges); markers are never known.
        In a read_uncommitted run, a read proves nothing about a commit (the
        consumers read open transactions' records too, which may abort), so
        only acknowledged offsets count.
        """
        return self.t.per_position.where(self._committed())

    def _committed(self) -> Column:
        """On ``per_position``: whether the offset is one of ``committed_positions``.

        An offset known only from an unknown-outcome transaction's delivery
        report may hold an aborted record, so only an ack or a read makes it one.
        An ack without an offset (a DUPLICATE_SEQUENCE_NUMBER batch) whose value
        was read at one place acknowledges that place: the ack proves the value
        committed, the read proves where, and a value is sent once
        (``per_position``'s ``acked``; the reference's ``known_offsets`` too).
        """
        committed = ~F.col("aborted")
        if not self.t.read_committed:
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
        known = self.t.per_position.select(
            *TP, "offset", F.lit(False).alias("marker"), self._committed().alias("committed")
        )
        seeks = self.t.control.where(~F.col("nemesis") & (F.col("f") == "seek"))
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

        return self.t.keep(
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
        return self.committed_positions if self.t.read_committed else self.t.per_position

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
        lines = self.t.ops.where(kind("commit"))
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
        return self.t.keep(by_partition, small=True)

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
        ops = self.t.control.where(~F.col("nemesis") & owning).select(
            "hid", "process", "index", "time", "f", "type",
            "assigned", "revoked", "partitions", "topics",
        )  # fmt: skip
        groups = F.broadcast(self.t.members.select("hid", "process", "group"))
        return self.t.keep(ops.join(groups, ["hid", "process"]), small=True)
