"""Column expressions and frame helpers that every check builds with.

Apart from ``Tables`` (checkers/tables.py) so that a check family's own
tables (``checkers.queue.queue_tables``) and the checks themselves import the
vocabulary of the rows table without importing the shared tables.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import reduce

from kafka_chaos.checkers.ingest.op_codes import ACK, FAIL, INFO, READ, SEND_TYPES
from py4j.protocol import Py4JError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

TP = ["hid", "topic", "partition"]
POLL = ["hid", "process", "topic", "partition", "index"]  # one poll line's reads of a partition
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


def free_checkpoint(df: DataFrame) -> None:
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
