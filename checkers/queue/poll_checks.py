"""Read and ack order: nonmonotonic-poll, poll-skip (and the pairs nonmonotonic-send uses).

A consumer process reads each partition in offset order until something
legitimately moves its position: a subscribe/assign by that process, a
rebalance callback of that process naming the partition (assigned or revoked;
it may then resume from the committed offset), or a seek naming it.  Those
are resets, after which the next read is compared with nothing, except a
seek to an offset o >= 0: it names the position, so the next read there is
compared with o as if the consumer had just read o - 1.  A
transaction's reads are one poll at its completion's index: these checks
compare them with the reads before and after the transaction, and the
int-* checks (checkers/txn/txn_checks.py) judge its inside.  A partition the
transaction lists in ``rebalanced`` was reset at some point inside it, maybe
after its last read there, so it counts as reset both before the
transaction's reads (its rebalance lines come first) and right after them.
Resets, seeks and reads are merged into one stream per (process, partition)
ordered by history index (reads of one poll by their position in it), so
"consecutive reads with no reset in between" is simply "this row is a read
and the previous row a read or a seek" (a seek's entry ends at o - 1, as a
read of o - 1 would). A producer's acks per partition form a stream of
their own, already paired ack by ack at ingest (checkers/ingest/ack_order.py).

The read streams are ordered in one window pass, and only the few
suspicious consecutive pairs are kept (cached) for the checks.
"""

from __future__ import annotations

from kafka_chaos.checkers import examples, hints, sources
from kafka_chaos.checkers.check import Basis, Check
from kafka_chaos.checkers.frames import POLL, TP, anomaly, is_read, is_send
from kafka_chaos.checkers.queue.queue_tables import QueueTables
from kafka_chaos.checkers.spec_view import CheckedSpec
from kafka_chaos.checkers.tables import Tables
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

STREAM = ["hid", "process", "topic", "partition"]


def seek_offsets(t: Tables) -> DataFrame:
    """(hid, process, index, topic, partition, offset): each partition a seek line
    names, with the position it moved to (a partition named twice in one line:
    its last entry)."""
    seeks = t.control.where(~F.col("nemesis") & (F.col("f") == "seek"))

    def named_later(x: F.Column, i: F.Column) -> F.Column:
        later = F.slice("offsets", i + 2, F.size("offsets"))
        return F.exists(later, lambda y: (y.topic == x.topic) & (y.partition == x.partition))

    named = F.filter("offsets", lambda x, i: ~named_later(x, i))
    return seeks.select("hid", "process", "index", F.explode(named).alias("tp")).select(
        "hid", "process", "index", "tp.topic", "tp.partition", "tp.offset"
    )


def _resets(t: Tables) -> DataFrame:
    """(hid, process, index, topic, partition): lines that move a read position
    to somewhere not named (a seek to an offset is ``_runs``' own entry)."""
    ops = t.control.where(~F.col("nemesis"))
    rebalances = ops.where(F.col("f") == "rebalance").select(
        "hid",
        "process",
        "index",
        F.explode(
            F.concat(F.coalesce("assigned", F.array()), F.coalesce("revoked", F.array()))
        ).alias("tp"),
    )
    logical = seek_offsets(t).where(F.col("offset") < 0)  # a logical offset: a plain reset
    named = rebalances.select("hid", "process", "index", "tp.topic", "tp.partition").unionByName(
        logical.select("hid", "process", "index", "topic", "partition")
    )
    inside_txns = t.txn_lines.where(F.col("type") != "invoke").select(
        "hid", "process", "index", F.explode("rebalanced").alias("tp")
    )
    named = named.unionByName(
        inside_txns.select("hid", "process", "index", "tp.topic", "tp.partition")
    )
    joins = ops.where(F.col("f").isin("subscribe", "assign")).select("hid", "process", "index")
    streams = t.polls.select("hid", "process", "topic", "partition").distinct()
    everything = joins.join(streams, ["hid", "process"])
    return named.unionByName(everything.select(*named.columns))


def _runs(t: Tables) -> DataFrame:
    """Read stream entries: one per (poll line, partition) read (``Tables.polls``),
    one per reset, and one per seek to an offset o >= 0, which is neither: it
    ends (``last``) at o - 1, where the next read must continue from."""
    reads = t.polls.select("*", F.lit(False).alias("reset"), F.lit(False).alias("seek"))
    resets = _entries(_resets(t), F.lit(None), reset=True)
    seeks = _entries(seek_offsets(t).where(F.col("offset") >= 0), F.col("offset") - 1, seek=True)
    return reads.unionByName(resets).unionByName(seeks)


def _entries(rows: DataFrame, last: F.Column, reset: bool = False, seek: bool = False) -> DataFrame:
    """``rows`` as stream entries that read nothing (no ``first``); ``last``: where
    the next read continues from, if known."""
    return rows.select(
        "hid",
        "process",
        "topic",
        "partition",
        "index",
        F.lit(None).cast("long").alias("first"),
        last.cast("long").alias("last"),
        F.lit(reset).alias("reset"),
        F.lit(seek).alias("seek"),
    )


def backward_acks(t: Tables) -> DataFrame:
    """Acks at an offset not above their producer stream's previous ack (ingest
    pairs every ack with that one: checkers/ingest/ack_order.py)."""
    # Pairs inside one transaction (one line) are int-nonmonotonic-send's.
    backwards = (F.col("offset") <= F.col("prev_offset")) & (F.col("prev_index") != F.col("index"))
    acks = t.ops.where(is_send("ok") & backwards)
    return acks.select(
        "hid",
        "process",
        "topic",
        "partition",
        F.lit(True).alias("send"),
        "index",
        "offset",
        "prev_offset",
        "prev_index",
    )


def suspicious(offset: str, prev: str) -> F.Column:
    """Whether a read at ``offset`` right after one at ``prev`` is not the next
    offset: it went back, or skipped ahead (which may be fine: ``skipping``)."""
    return (F.col(offset) <= F.col(prev)) | (F.col(offset) > F.col(prev) + 1)


def suspicious_pairs(t: Tables) -> DataFrame:
    """Consecutive (previous -> this) entries of a stream that may be an anomaly (cached).

    ``send`` pairs: an ack at an offset not above the previous ack's.
    Read pairs: two reads in a row, with no reset between, that go
    backwards or jump ahead: across polls (previous poll's last record ->
    this poll's first), and inside polls that are not one straight run (a
    record and the one before it in its poll's reads of the partition).
    A seek to o followed by a read is a read pair from o - 1 (``after_seek``:
    o - 1 need not be a known offset, ``skipping``).
    """
    # At one index, a transaction's reads come before the reset its rebalances
    # make; a seek line has an index of its own.
    w = Window.partitionBy(*STREAM).orderBy("index", "reset")
    runs = _runs(t).select(
        "*",
        F.lag("last").over(w).alias("prev_offset"),
        F.lag("reset").over(w).alias("prev_reset"),
        F.lag("seek").over(w).alias("after_seek"),
        F.lag("index").over(w).alias("prev_index"),
    )
    read_pair = ~F.col("reset") & ~F.col("seek") & ~F.col("prev_reset")
    across = runs.where(read_pair & suspicious("first", "prev_offset")).select(
        *STREAM,
        F.lit(False).alias("send"),
        "index",
        F.col("first").alias("offset"),
        "prev_offset",
        "prev_index",
        "after_seek",
    )
    # Inside a poll, ingest linked each record to the one before it in the
    # same partition (checkers/ingest/poll_positions.py): a straight run has none
    # of these pairs, so no ordering is needed.
    inside = t.ops.where(
        is_read() & F.col("txn").isNull() & suspicious("offset", "prev_offset")
    ).select(
        *POLL[:-1],
        F.lit(False).alias("send"),
        "index",
        "offset",
        "prev_offset",
        F.col("index").alias("prev_index"),
        F.lit(False).alias("after_seek"),
    )
    acks = backward_acks(t).withColumn("after_seek", F.lit(False))
    return t.keep(across.unionByName(inside).unionByName(acks), small=True)


def _fields() -> list:
    return [
        "process",
        "topic",
        "partition",
        F.col("prev_offset").alias("from_offset"),
        F.col("offset").alias("to_offset"),
        F.array_distinct(F.array("prev_index", "index")).alias("indices"),
    ]


def skipping(jumps: DataFrame, t: Tables, committed: bool) -> DataFrame:
    """The ``jumps`` (``prev_offset`` -> ``offset``) over a known offset: one of
    ``QueueTables.committed_positions`` if ``committed``, else any known one.

    Every jump starts at a known offset: a read's (a read is an observation)
    or an acknowledged send's with its offset, which is where ingest pairs
    acks (checkers/ingest/ack_order.py); or, ``after_seek`` (a column the int-*
    checks' jumps lack: false), one below a seek's offset, which
    ``QueueTables.next_positions`` holds as a marker row.  So the next offset
    above its start is looked up there, one ordered pass for all checks,
    made only once some check has a jump at all.
    """
    if jumps.isEmpty():  # the same columns as a found skip, for unions
        return jumps.withColumn("next_known", F.lit(None).cast("long"))
    column = "next_committed" if committed else "next_any"
    nexts = QueueTables.of(t).next_positions.select(
        *TP, F.col("offset").alias("prev_offset"), "marker", F.col(column).alias("next_known")
    )
    if "after_seek" in jumps.columns:
        found = jumps.join(
            nexts.withColumnRenamed("marker", "after_seek"), TP + ["prev_offset", "after_seek"]
        )
    else:
        found = jumps.join(nexts.where(~F.col("marker")).drop("marker"), TP + ["prev_offset"])
    return found.where(F.col("next_known") < F.col("offset"))


def poll_checks(t: Tables, pairs: DataFrame) -> list[DataFrame]:
    """nonmonotonic-poll and poll-skip; ``skipped``/``skipped_count`` come from ``enrich``.

    A jump skips data when the next offset known to hold a value after where
    the consumer was lies before where it landed.  The ordered pass over every
    known offset that this needs only runs when some read jumped at all.
    Which offsets a consumer must read depends on its isolation level
    (``QueueTables.known_positions``); the final drain's is read_committed.
    """
    reads = pairs.where(~F.col("send"))
    backwards = reads.where(F.col("offset") <= F.col("prev_offset"))
    jumps = reads.where(F.col("offset") > F.col("prev_offset") + 1)
    if t.read_committed:
        skips = skipping(jumps, t, committed=True)
    else:  # the drain reads committed data whatever the run's consumers do
        drain = F.broadcast(t.drain_processes)
        skips = skipping(
            jumps.join(drain, ["hid", "process"], "left_anti"), t, committed=False
        ).unionByName(skipping(jumps.join(drain, ["hid", "process"], "left_semi"), t, True))
    return [
        anomaly(backwards, "nonmonotonic-poll", F.col("index"), *_fields()),
        anomaly(skips, "poll-skip", F.col("index"), *_fields()),
    ]


def unless_unclean(spec: CheckedSpec) -> str:
    """A warning where unclean election may move the log under a consumer.

    Why: an out-of-sync replica elected leader truncates what consumers already
    read, and their positions past its log end are reset by ``auto.offset.reset``:
    the next read can go back, or jump.  Kafka's topic config says such an
    election "may result in data loss", so the order a consumer sees is not
    promised there either (seen in the unclean preset: one backwards read)."""
    return "warning" if spec.unclean else "error"


POLL_SEVERITY_DOC = "error; warning with unclean leader election on"

# What unclean election's doc allows a consumer's reads to do.
UNCLEAN_POLL_ALLOWS = (
    "with unclean.leader.election.enable=true, reads that go back or jump after the "
    "log was truncated under the consumer and its position reset, as the setting's doc "
    f"allows: \u201c{sources.UNCLEAN}\u201d (warning)",
)


NONMONOTONIC_POLL = Check(
    name="nonmonotonic-poll",
    family="queue",
    title="Non-monotonic poll",
    explanation=(
        "A consumer read a partition backwards (or re-read an offset) without any assignment "
        "change that could explain a seek."
    ),
    finds=(
        "one consumer process, same partition: a read at an offset <= its previous read, with no "
        "reset in between; right after a seek to o, a read below o"
    ),
    severity_doc=POLL_SEVERITY_DOC,
    meaning="A consumer read offsets of a partition that went backwards or repeated.",
    causes=(
        "Expected across rebalances in subscribe mode (the new owner restarts from the committed "
        "offset); a bug with manual assignment, or log truncation."
    ),
    basis=Basis(
        promise=sources.ONE_LARGER,
        source=sources.CONSUMER_SOURCE,
        url=sources.CONSUMER_JAVADOC_URL,
        allows=(
            "a re-read after a reset of the partition (subscribe, assign, a rebalance naming it)",
            "a re-read from the offset a seek named",
            *UNCLEAN_POLL_ALLOWS,
        ),
    ),
    severity=unless_unclean,
    hints=(hints.subscribe_mode,),
)

POLL_SKIP = Check(
    name="poll-skip",
    family="queue",
    title="Poll skip",
    explanation=(
        "A consumer jumped over offsets known to hold values, without any assignment change in "
        "between: those records were skipped."
    ),
    finds=(
        "consecutive reads a -> b of one consumer process and partition jump over offsets it must "
        "read, with no reset in between; right after a seek to o, a read past such an offset at or"
        " above o"
    ),
    severity_doc=POLL_SEVERITY_DOC,
    meaning="A consumer jumped over offsets of a partition that held messages it never read.",
    causes=(
        "Offsets committed past unread data, a seek after a rebalance, or truncation; expected in "
        "subscribe mode when another member read the skipped range."
    ),
    enrich=examples.skipped,
    basis=Basis(
        promise=sources.NEXT_RECORD,
        source=sources.CONSUMER_SOURCE,
        url=sources.CONSUMER_JAVADOC_URL,
        allows=(
            "a jump over transaction markers, and under read_committed over aborted records",
            "a jump after a reset of the partition (subscribe, assign, a rebalance naming it)",
            *UNCLEAN_POLL_ALLOWS,
        ),
    ),
    severity=unless_unclean,
    hints=(hints.subscribe_mode,),
)
