"""acked-lost: acknowledged values absent from a complete final drain (docs/results.md).

``lost-write`` and ``unseen`` count a value as safe once any consumer read
it.  After an unclean leader election that is exactly wrong: consumers read
the old leader's acknowledged records, then the new leader truncated them, and
they are gone from the log for good.  This check asks the durable question
instead: which acknowledged values are missing from what the final drain read
from every partition's log start to its high watermark?

The drain proves it read everything through its ``drain`` lines (one per
partition: log start, high watermark, how far it read).  A missing value is

- **lost** when its partition's drain was complete and its offset is at or
  above the log start;
- **excused** (retention) when its offset is below the log start;
- **undecided** when the drain did not provably reach its partition's high
  watermark, or no drain ran: the check is then ``unknown``, never ``valid``.

An ack without an offset (a batch the broker answered DUPLICATE_SEQUENCE_NUMBER:
workloads/delivery_offsets.py) is placed where its value was read, when that
is one place.  Never read, it is lost where the log start is 0, and
**unplaced** (undecided) above: retention may have removed it.
"""

from __future__ import annotations

from typing import Any

from kafka_chaos.checkers import examples, hints, sources
from kafka_chaos.checkers.check import Basis, Check, Context
from kafka_chaos.checkers.frames import TP, Branch
from kafka_chaos.checkers.queue.send_checks import LOSS_ALLOWS, LOSS_SEVERITY_DOC, loss_severity
from kafka_chaos.checkers.results import LossTally
from kafka_chaos.checkers.tables import Tables
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

MAX_UNPROVEN = 20  # partitions named in an unknown verdict's reason


def drain_bounds(t: Tables) -> DataFrame:
    """(hid, topic, partition, log_start, high_watermark, reached, complete): each
    partition's last ``drain`` line."""
    lines = t.control.where((F.col("f") == "drain") & ~F.col("nemesis"))
    last = lines.groupBy(*TP).agg(
        F.max_by(F.struct("log_start", "high_watermark", "reached"), "index").alias("b")
    )
    b = F.col("b")
    complete = b["high_watermark"].isNotNull() & (b["reached"] >= b["high_watermark"])
    return t.keep(
        last.select(
            *TP,
            b["log_start"].alias("log_start"),
            b["high_watermark"].alias("high_watermark"),
            b["reached"].alias("reached"),
            F.coalesce(complete, F.lit(False)).alias("complete"),
        ),
        small=True,
    )


def absent_values() -> Column:
    """On ``Tables.per_value``: acknowledged values the final drain did not read."""
    return F.col("ack_index").isNotNull() & F.col("drain_index").isNull()


def with_status(values: DataFrame, bounds: DataFrame) -> DataFrame:
    """Rows of ``Tables.per_value`` with their partition's drain bounds (``drain_bounds``)
    and, as ``status``, what their absence from the drain would mean.

    A value acknowledged without a partition (a committed transaction's send
    whose delivery report never came) has no bounds of its own: it is decided
    only when every drained partition of its history was complete.  ``place``:
    the ack's offset, or for one acknowledged without an offset the one place
    it was read (seen at two, it is a duplicate and stays unplaced).
    """
    whole = bounds.groupBy("hid").agg(F.bool_and("complete").alias("all_complete"))
    rows = values.join(F.broadcast(bounds), TP, "left").join(F.broadcast(whole), "hid", "left")
    place = F.coalesce(F.col("offset"), F.when(~F.col("dup"), F.col("pos_offset")))
    decided = F.when(F.col("partition").isNotNull(), F.col("complete")).otherwise(
        F.col("all_complete")
    )
    status = (
        F.when(~F.coalesce(decided, F.lit(False)), "undecided")
        .when(place < F.col("log_start"), "excused")
        .when(place.isNull() & (F.col("log_start") > 0), "unplaced")
        .otherwise("lost")
    )
    return rows.select("*", place.alias("place"), status.alias("status"))


def missing(t: Tables, bounds: DataFrame) -> DataFrame:
    """Acknowledged values the final drain did not read, each with its status."""
    return with_status(t.per_value.where(absent_values()), bounds)


def acked_lost() -> Branch:
    """On ``with_status`` rows: the acknowledged values the drain proves lost."""
    return Branch(
        "acked-lost",
        absent_values() & (F.col("status") == "lost"),
        F.col("ack_index"),
        (
            F.col("val").alias("value"),
            "topic",
            "partition",
            F.col("place").alias("offset"),
            "invoke_index",
            "ack_index",
            "ack_time",
            "read_index",
            "high_watermark",
            F.array_sort(
                F.filter(
                    F.array("invoke_index", "ack_index", "read_index"), lambda x: x.isNotNull()
                )
            ).alias("indices"),
        ),
    )


def tallies(rows: DataFrame, topic_names: dict[int, Any]) -> dict[int, LossTally]:
    """{hid: LossTally} of the values not counted as lost, in one small job."""
    undecided = F.col("status") == "undecided"
    unproven_tp = F.when(undecided & F.col("partition").isNotNull(), F.struct(*TP[1:]))
    unplaced = F.col("status") == "unplaced"
    found = (
        rows.where(F.col("status") != "lost")
        .groupBy("hid")
        .agg(
            F.count(F.when(F.col("status") == "excused", 1)).alias("excused"),
            F.count(F.when(undecided | unplaced, 1)).alias("undecided"),
            F.slice(F.array_sort(F.collect_set(unproven_tp)), 1, MAX_UNPROVEN).alias("tps"),
            F.count(F.when(unplaced, 1)).alias("unplaced"),
        )
        .collect()
    )
    return {
        r["hid"]: LossTally(
            r["excused"],
            r["undecided"],
            tuple(f"{topic_names[tp['topic']]}-{tp['partition']}" for tp in r["tps"]),
            r["unplaced"],
        )
        for r in found
    }


def bounds(ctx: Context) -> DataFrame:
    """``drain_bounds(ctx.t)``, once per analysis: the frames and the tallies share it."""
    return ctx.memo("drain_bounds", lambda: drain_bounds(ctx.t))


def absent(ctx: Context) -> DataFrame:
    """``missing``, once per analysis."""
    return ctx.memo("absent", lambda: missing(ctx.t, bounds(ctx)))


def losses(ctx: Context) -> dict[int, LossTally]:
    """``tallies`` of every history, once per analysis."""
    return ctx.memo("losses", lambda: tallies(absent(ctx), ctx.t.topic_names))


def drain_proven(ctx: Context, hid: int, final_drain: bool) -> bool:
    """Whether a history's final drain proves a value it did not read gone: it ran,
    and it read every partition holding an acknowledged value to the end."""
    tally = losses(ctx).get(hid)
    return final_drain and not (tally and tally.undecided)


def _acked_lost_mechanism(examples: list[dict[str, Any]]) -> str:
    """A range whose offsets hold other values now was overwritten, not just cut off."""
    if any(ex.get("now_values") for ex in examples):
        return "acknowledged with one value, now holding another"
    return "acknowledged, then absent from the final log"


ACKED_LOST = Check(
    name="acked-lost",
    family="queue",
    title="Acknowledged message lost",
    explanation=(
        "The broker acknowledged these sends, yet they are absent from the final log: a final "
        "drain read every partition from its log start to its high watermark and did not find "
        "them. Unlike lost-write and unseen, it counts values some consumer read before they "
        "vanished (an unclean leader election truncates exactly those). Values below the log start"
        " (retention) are excused."
    ),
    finds=(
        "an acked value absent from a **complete** final drain (one that read its partition from "
        "the log start to the high watermark, as its `drain` lines prove), at or above the log "
        'start; valid `"unknown"` while acked values are missing where the drain did not prove '
        "completeness, or no drain ran"
    ),
    severity_doc=LOSS_SEVERITY_DOC,
    meaning=(
        "The broker acknowledged this message, and it is not in the final log: a final drain read "
        "every partition from its start to its high watermark after all faults healed and did not "
        "find it. It may have been read by a consumer before it vanished, which is why lost-write "
        "and unseen do not count it."
    ),
    causes=(
        "An unclean leader election: an out-of-sync replica became leader without the message, and"
        " the old leader truncated its log to match when it rejoined. Also min.insync.replicas=1 "
        "with a lone leader acknowledging, or acks=1."
    ),
    severity=loss_severity,
    enrich=examples.vanished,
    basis=Basis(
        promise=sources.ACKS_ALL,
        source=sources.ACKS_SOURCE,
        url=sources.PRODUCER_CONFIG_URL,
        allows=(
            "values below the log start offset, removed by retention (excused)",
            "values in a partition the drain did not prove it read to the end (unknown)",
            "sends with acks=0, recorded as `info`: nothing was acknowledged",
            *LOSS_ALLOWS[1:],
        ),
    ),
    mechanism=_acked_lost_mechanism,
    hints=(hints.loss_allowed,),
)
