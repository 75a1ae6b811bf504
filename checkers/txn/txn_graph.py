"""The transaction dependency graph, inferred in Spark, and its cyclic parts.

Vertices are transactions that may have committed (``ok``, or ``info``: an
unknown outcome), named by their invoke's index.  Edges, as Jepsen's Kafka
checker infers them (docs/results.md, "Cycle checks"):

* **ww**: T1's value directly precedes T2's in a partition's offset order
  (only transactional values count; the version order is transitive, so
  plain writes between them change nothing).  The order is of committed
  versions, as Jepsen's: an unknown transaction's delivery report places
  its value only once a read proves the transaction committed (``written``);
* **wr**: T2 read a value T1 sent;
* **process**: T1 and T2 committed (``ok``) on the same process, T1 first
  and no other committed one between (Elle's process order skips ``info``);
* **realtime**: T1 committed before T2 began.

Only the first two carry an explanation: Elle derives process and realtime
order itself from the operations it is given.  Here they only serve to find
which transactions can lie on a cycle at all.  Realtime order is quadratic
if written out, so it is encoded through one virtual vertex per commit: T ->
its commit, each commit -> the next in time, and the last commit before T2
began -> T2.  T1 reaches T2 through that chain exactly when T1 committed
before T2 began, so strongly connected components (restricted to real
transactions) are those of the full graph, with a linear number of edges.

The components come from scipy's ``csgraph`` (Tarjan's algorithm in C):
the edge list is two integer columns, about 4 per transaction (a 1e6-op
history: a few tens of MB), which is far below what the history itself
weighs, and linear-time SCC on one machine beats an iterative Spark SCC
(GraphFrames would need a package from outside Maven Central) at the sizes
a single history reaches.  Only the transactions of components with two
or more of them, and their ww/wr edges, ever reach Elle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from kafka_chaos.checkers.frames import tp_columns
from kafka_chaos.checkers.ingest.op_codes import ACK, INFO
from kafka_chaos.checkers.tables import Tables
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

EDGE = ["hid", "src", "dst"]


@dataclass
class Component:
    """A strongly connected set of transactions (invoke indices) of one history."""

    hid: int
    txns: list[int]


def transactions(t: Tables) -> DataFrame:
    """(hid, txn, process, invoke_time, done_index, done_time, type) of every finished
    transaction that may have committed (``ok`` or ``info``)."""
    lines = t.txn_lines
    invokes = lines.where(F.col("type") == "invoke").select(
        "hid", F.col("index").alias("txn"), "process", F.col("time").alias("invoke_time")
    )
    done = lines.where(F.col("type").isin("ok", "info")).select(
        "hid", "txn", F.col("index").alias("done_index"), F.col("time").alias("done_time"), "type"
    )
    return invokes.join(done, ["hid", "txn"])


def written(t: Tables) -> DataFrame:
    """(hid, val, txn, topic, partition, offset): each committed version a
    transaction that may have committed wrote, at its one known position.

    A committed (``ok``) transaction's values and every read value take
    part.  An unknown (``info``) transaction's value known only from its
    delivery report takes part once the transaction is proven committed
    (``proven_unknown``): until then the report may name an aborted record,
    which is no version, just as an aborted transaction's is not (Jepsen's
    version order likewise takes an ``info`` operation's sends only when it
    ``must-have-committed?``).  Left out, its neighbours follow each other
    directly in the order."""
    values = t.per_value.where(
        F.col("txn").isNotNull()
        & F.col("done_op").isin(ACK, INFO)
        & ~F.col("dup")
        & F.col("pos_offset").isNotNull()
    )
    sure = values.where((F.col("done_op") == ACK) | F.col("read_index").isNotNull())
    reported = values.where((F.col("done_op") == INFO) & F.col("read_index").isNull())
    proven = reported.join(F.broadcast(proven_unknown(t)), ["hid", "txn"], "left_semi")
    return sure.unionByName(proven).select(
        "hid", "val", "txn", *tp_columns("pos_tp", "topic", "partition"),
        F.col("pos_offset").alias("offset"),
    )  # fmt: skip


def proven_unknown(t: Tables) -> DataFrame:
    """(hid, txn): unknown-outcome transactions proven committed, because a reader
    that promised committed data (every consumer under read_committed, the
    final drain always) read one of their values: the proof torn-transaction
    accepts (checkers/txn/txn_checks.py).  Few rows: an unknown outcome is rare."""
    read = t.per_value.where(
        F.col("txn").isNotNull() & (F.col("done_op") == INFO) & F.col("read_index").isNotNull()
    )
    if not t.read_committed:
        drained = t.reads.join(F.broadcast(t.drain_processes), ["hid", "process"], "left_semi")
        read = read.join(drained.select("hid", "val"), ["hid", "val"], "left_semi")
    return read.select("hid", "txn").distinct()


def writers(t: Tables) -> DataFrame:
    """(hid, val, src): the transaction (that may have committed) that sent each value."""
    done = t.per_value.where(F.col("txn").isNotNull() & F.col("done_op").isin(ACK, INFO))
    return done.select("hid", "val", F.col("txn").alias("src"))


def ww_edges(t: Tables) -> DataFrame:
    """T1 -> T2 when T1's value directly precedes T2's in a partition (transactional
    values only); one edge per pair, explained by its lowest offset."""
    w = Window.partitionBy("hid", "topic", "partition").orderBy("offset")
    values = written(t)
    pairs = values.select(
        "*",
        F.lead("txn").over(w).alias("dst"),
        F.lead("val").over(w).alias("next_value"),
        F.lead("offset").over(w).alias("next_offset"),
    ).where(F.col("dst").isNotNull() & (F.col("dst") != F.col("txn")))
    return _first_per_pair(
        pairs.select(
            "hid",
            F.col("txn").alias("src"),
            "dst",
            F.lit("ww").alias("kind"),
            F.col("val").alias("value"),
            "topic",
            "partition",
            "offset",
            "next_value",
            "next_offset",
        )  # fmt: skip
    )


def wr_edges(t: Tables) -> DataFrame:
    """T1 -> T2 when transaction T2 read a value T1 sent."""
    reads = t.ops.where((F.col("kind") == "record") & F.col("txn").isNotNull()).select(
        "hid", "val", F.col("txn").alias("dst"), "topic", "partition", "offset"
    )
    pairs = reads.join(writers(t), ["hid", "val"]).where(F.col("src") != F.col("dst"))
    return _first_per_pair(
        pairs.select(
            "hid",
            "src",
            "dst",
            F.lit("wr").alias("kind"),
            F.col("val").alias("value"),
            "topic",
            "partition",
            "offset",
            F.lit(None).cast("long").alias("next_value"),
            F.lit(None).cast("long").alias("next_offset"),
        )  # fmt: skip
    )


def _first_per_pair(edges: DataFrame) -> DataFrame:
    w = Window.partitionBy(*EDGE, "kind").orderBy("offset", "value")
    return edges.select("*", F.row_number().over(w).alias("rn")).where("rn = 1").drop("rn")


def order_edges(txns: DataFrame) -> DataFrame:
    """Process order and the realtime chain (module docstring), as (hid, src, dst).

    Commit vertices get negative ids (-1 - the completion's index)."""
    # Elle orders only a process's committed (ok) operations (elle.core process-graph).
    by_process = Window.partitionBy("hid", "process").orderBy("txn")
    process = (
        txns.where(F.col("type") == "ok")
        .select("hid", F.col("txn").alias("src"), F.lead("txn").over(by_process).alias("dst"))
        .where(F.col("dst").isNotNull())
    )
    commits = txns.where(F.col("type") == "ok").select(
        "hid", F.col("done_time").alias("time"), (-1 - F.col("done_index")).alias("commit"),
        F.col("txn").alias("src"),
        F.lit(0).alias("order"),
    )  # fmt: skip
    to_commit = commits.select("hid", "src", F.col("commit").alias("dst"))
    by_time = Window.partitionBy("hid").orderBy("time", "commit")
    chain = commits.select(
        "hid", F.col("commit").alias("src"), F.lead("commit").over(by_time).alias("dst")
    ).where(F.col("dst").isNotNull())
    # A transaction began after every commit stamped before its invoke: ties
    # (same nanosecond) are not ordered, so the commit must be strictly earlier.
    starts = txns.select(
        "hid", F.col("invoke_time").alias("time"), F.lit(None).cast("long").alias("commit"),
        F.col("txn").alias("src"), F.lit(-1).alias("order"),
    )  # fmt: skip
    events = commits.unionByName(starts)
    timeline = (
        Window.partitionBy("hid")
        .orderBy("time", "order")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    last_commit = events.select(
        "hid", "src", "commit", F.last("commit", ignorenulls=True).over(timeline).alias("before")
    )
    from_time = last_commit.where(F.col("commit").isNull() & F.col("before").isNotNull()).select(
        "hid", F.col("before").alias("src"), F.col("src").alias("dst")
    )
    return process.unionByName(to_commit).unionByName(chain).unionByName(from_time)


def components(edges: DataFrame) -> list[Component]:
    """Strongly connected components holding two or more real transactions."""
    found: list[Component] = []
    table = edges.select(*EDGE).toArrow()  # Arrow batches: no Python row objects
    hid, src, dst = (table[c].to_numpy(zero_copy_only=False) for c in EDGE)
    for h in np.unique(hid):
        mine = hid == h
        found += [Component(int(h), txns) for txns in _sccs(src[mine], dst[mine])]
    return found


def _sccs(src: np.ndarray, dst: np.ndarray) -> list[list[int]]:
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    nodes, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    n = len(nodes)
    if n == 0:
        return []
    a, b = inverse[: len(src)], inverse[len(src) :]
    graph = coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n, n)).tocsr()
    _, labels = connected_components(graph, directed=True, connection="strong")
    real = nodes >= 0
    ids, parts = nodes[real], labels[real]
    counts = np.bincount(parts, minlength=labels.max() + 1)
    keep = counts[parts] >= 2
    ids, parts = ids[keep], parts[keep]
    order = np.argsort(parts, kind="stable")  # group by component in one sort
    ids, parts = ids[order], parts[order]
    groups = np.split(ids, np.flatnonzero(np.diff(parts)) + 1) if len(ids) else []
    return [sorted(g.tolist()) for g in groups]


def graph(t: Tables, ww: bool = True) -> tuple[DataFrame, DataFrame, list[Component]]:
    """(transactions, explained ww/wr edges, cyclic components) of every history;
    without ``ww`` (Jepsen's --no-ww-deps) no ww edge is inferred."""
    txns = t.keep(transactions(t), small=True)
    explained = wr_edges(t).unionByName(ww_edges(t)) if ww else wr_edges(t)
    explained = t.keep(explained)
    live = F.broadcast(txns.select("hid", F.col("txn").alias("src")))
    # Edges from or to a transaction that cannot have committed are dropped.
    explained = explained.join(live, ["hid", "src"], "left_semi").join(
        live.withColumnRenamed("src", "dst"), ["hid", "dst"], "left_semi"
    )
    every = explained.select(*EDGE).unionByName(order_edges(txns))
    return txns, explained, components(every)


def component_data(
    txns: DataFrame, edges: DataFrame, found: list[Component]
) -> list[tuple[Component, list[dict[str, Any]], list[dict[str, Any]]]]:
    """Each component with its transactions and the ww/wr edges between them.

    The members go to Spark as one Arrow table (a literal of 28k rows took
    17 s to plan at 1e6 ops) and only their rows come back, as Arrow."""
    if not found:
        return []
    spark = txns.sparkSession
    members = spark.createDataFrame(
        pa.table(
            {
                "hid": pa.array([c.hid for c in found for _ in c.txns], pa.int32()),
                "txn": pa.array([x for c in found for x in c.txns], pa.int64()),
                "part": pa.array([k for k, c in enumerate(found) for _ in c.txns], pa.int64()),
            }
        )
    )
    ops: list[list[dict[str, Any]]] = [[] for _ in found]
    for r in txns.join(F.broadcast(members), ["hid", "txn"]).toArrow().to_pylist():
        ops[r.pop("part")].append(r)
    src = members.withColumnRenamed("txn", "src")
    dst = members.withColumnRenamed("txn", "dst").withColumnRenamed("part", "dst_part")
    inside = (
        edges.join(F.broadcast(src), ["hid", "src"])
        .join(F.broadcast(dst), ["hid", "dst"])
        .where(F.col("part") == F.col("dst_part"))
        .drop("dst_part")
    )
    links: list[list[dict[str, Any]]] = [[] for _ in found]
    for r in inside.toArrow().to_pylist():
        links[r.pop("part")].append(r)
    return [(c, sorted(ops[k], key=lambda o: o["txn"]), links[k]) for k, c in enumerate(found)]
