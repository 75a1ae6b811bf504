"""history.jsonl -> one Spark table of *rows* (and its Parquet cache).

A row is one history line, except that a poll's records are exploded into one
row each (``j`` = position in the poll, ``topic/partition/offset/val`` = the
record).  Sends carry the same four columns from their value, so "every
observation of a value at an offset" is a single filter, not a union.  This
shape is what makes the checkers fast: every check reads a few flat columns.

Spark parses the JSON with an explicit schema in permissive mode, which is
fast at 1e7 lines.  Only if that finds a malformed row do we fall back to a
line-by-line Python scan, whose only job is to name the first bad line.  The
rows are written to ``history.parquet`` beside the history so that a re-check
(or the report) skips the JSON parse.

Every row carries ``hid`` (history id, the optional top-level ``hid`` field,
default 0) so that many small histories can be judged in one Spark job.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from harness.errors import HistoryError
from workloads.history import TYPES, read_history

_PART = "array<array<string>>"  # [[topic, partition(, offset)], ...]: mixed types, parsed as text
JSON_SCHEMA = (
    "hid int, index long, time long, process string, type string, f string, value struct<"
    "topic string, key string, value long, partition int, offset long, error string,"
    " final boolean, records array<struct<topic string, partition int, offset long,"
    " key string, value long>>, group string, topics array<string>,"
    f" partitions {_PART}, assigned {_PART}, revoked {_PART}, offsets {_PART},"
    " phase string, id long, targets array<string>, reason string>, _corrupt string"
)

PARQUET_NAME = "history.parquet"
FORMAT = "rows-3"  # bump when the rows table changes shape: older caches are rebuilt
FORMAT_FILE = "_KAFKA_CHAOS_FORMAT"


def _pairs(col: str) -> F.Column:
    """[[topic, partition], ...] (parsed as strings) -> array<struct<topic, partition>>."""
    return F.transform(
        F.col(col),
        lambda x: F.struct(x[0].alias("topic"), x[1].cast("int").alias("partition")),
    )


def _triples(col: str) -> F.Column:
    return F.transform(
        F.col(col),
        lambda x: F.struct(
            x[0].alias("topic"),
            x[1].cast("int").alias("partition"),
            x[2].cast("long").alias("offset"),
        ),
    )


def _flatten(raw: DataFrame) -> DataFrame:
    """One row per line, a poll's records exploded (``j`` null for lines that are not polls)."""
    v = "value."
    nemesis = F.col("process") == "nemesis"
    # Where each line sat in the file, taken before the explode multiplies polls.
    raw = raw.select(
        "*",
        F.input_file_block_start().alias("_split"),
        F.monotonically_increasing_id().alias("_row"),
    )
    lines = raw.select(
        F.coalesce("hid", F.lit(0)).alias("hid"),
        "index",
        "time",
        F.when(nemesis, None).otherwise(F.col("process").cast("long")).alias("process"),
        nemesis.alias("nemesis"),
        "type",
        "f",
        F.col(v + "topic").alias("topic"),
        F.col(v + "value").alias("val"),
        F.col(v + "partition").alias("partition"),
        F.col(v + "offset").alias("offset"),
        F.col(v + "error").alias("error"),
        F.coalesce(F.col(v + "final"), F.lit(False)).alias("final"),
        F.col(v + "group").alias("group"),
        F.col(v + "topics").alias("topics"),
        _pairs(v + "partitions").alias("partitions"),
        _pairs(v + "assigned").alias("assigned"),
        _pairs(v + "revoked").alias("revoked"),
        _triples(v + "offsets").alias("offsets"),
        F.col(v + "phase").alias("phase"),
        F.col(v + "id").alias("fault_id"),
        F.col(v + "targets").alias("targets"),
        F.col(v + "reason").alias("reason"),
        "_bad",
        "_corrupt",
        "_split",
        "_row",
        F.posexplode_outer(v + "records").alias("j", "r"),
    )
    record = F.col("j").isNotNull()
    return lines.select(
        *[c for c in lines.columns if c not in ("topic", "val", "partition", "offset", "j", "r")],
        "j",
        *[
            F.when(record, F.col(f"r.{name}")).otherwise(F.col(col)).alias(col)
            for name, col in (("topic", "topic"), ("value", "val"), ("partition", "partition"))
        ],
        F.when(record, F.col("r.offset")).otherwise(F.col("offset")).alias("offset"),
    )


def line_rows() -> F.Column:
    """True once per history line (a poll with n records has n rows)."""
    return F.col("j").isNull() | (F.col("j") == 0)


def _bad_row() -> F.Column:
    """Rows Spark could not parse or that miss a required field."""
    return (
        F.col("_corrupt").isNotNull()
        | F.col("index").isNull()
        | F.col("time").isNull()
        | F.col("f").isNull()
        | ~F.col("type").isin(*TYPES)
        | F.col("type").isNull()
        | F.col("process").isNull()
        | ((F.col("process") != "nemesis") & F.col("process").cast("long").isNull())
    )


def parse_json(spark: SparkSession, history: Path) -> DataFrame:
    """The flat table of ``history`` plus ``_bad``/``_corrupt``, not yet validated."""
    history = Path(history)
    if not history.exists():
        raise HistoryError(f"{history}: no such history file")
    raw = (
        spark.read.schema(JSON_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", "_corrupt")
        .json(str(history))
    )
    return _flatten(raw.withColumn("_bad", _bad_row()))


def validate(flat: DataFrame, history: Path) -> DataFrame:
    """Raise HistoryError naming the first bad line, else return the good rows.

    One cheap aggregation decides; the Python scan runs only when it finds a
    problem.  Indices must count up from 0 by one, in file order: within a
    split of the file, ``index - row number`` is constant; consecutive splits
    continue where the previous one ended.
    """
    good = ~F.col("_bad") & line_rows()
    shift = F.when(good, F.col("index") - F.col("_row"))
    stats = (
        flat.groupBy("hid", "_split")
        .agg(
            F.sum((F.col("_bad") & line_rows()).cast("long")).alias("bad"),
            F.count(F.when(good, 1)).alias("n"),
            F.min(F.when(good, F.col("index"))).alias("lo"),
            F.max(F.when(good, F.col("index"))).alias("hi"),
            (F.min(shift) == F.max(shift)).alias("in_order"),
        )
        .collect()
    )
    bad = sum(r["bad"] for r in stats)
    misnumbered = _misnumbered(stats)
    if bad or misnumbered:
        scan_for_bad_line(history)  # raises with the line number when it finds one
        if misnumbered:
            raise HistoryError(
                f"{history}: operation indices do not count up from 0 by one ({misnumbered})"
            )
        if bad > 1 or _ends_with_newline(history):
            sample = flat.where("_bad").select("_corrupt").first()
            raise HistoryError(
                f"{history}: {bad} line(s) have fields of the wrong type, e.g. {sample[0]!r:.200}"
            )
        # Only a final line cut short by a crash: readers skip it, so do we.
    return flat.where(~F.col("_bad")).drop("_bad", "_corrupt", "_split", "_row")


def _misnumbered(stats: list) -> str | None:
    """What is wrong with the numbering of the per-(history, split) ``stats``, if anything."""
    expected: dict[int, int] = {}
    for r in sorted((r for r in stats if r["n"]), key=lambda r: (r["hid"], r["_split"])):
        start = expected.get(r["hid"], 0)
        if r["lo"] != start or r["hi"] - r["lo"] + 1 != r["n"] or not r["in_order"]:
            return f"history {r['hid']}: expected {start} next, found {r['lo']}..{r['hi']}"
        expected[r["hid"]] = r["hi"] + 1
    return None


def read_json(spark: SparkSession, history: Path) -> DataFrame:
    """Parse and validate ``history`` without writing anything."""
    return validate(parse_json(spark, history), history)


def load_history(spark: SparkSession, history: Path, parquet: Path | None = None) -> DataFrame:
    """DataFrame of a history, via its Parquet cache when that is up to date.

    The JSON is parsed once: straight into Parquet (bad rows flagged), and
    validation then reads only three Parquet columns.  ``history`` may also be
    a Parquet directory written by this module.
    """
    history = Path(history)
    if history.suffix == ".parquet" or history.is_dir():
        if not _current(history):
            raise HistoryError(
                f"{history}: not a Parquet history of this kafka-chaos version ({FORMAT}); "
                "check the history.jsonl it came from"
            )
        rows = spark.read.parquet(str(history)).where(~F.col("_bad"))
        return rows.drop("_bad", "_corrupt", "_split", "_row")
    parquet = parquet or history.with_suffix(".parquet")
    marker = parquet / "_SUCCESS"
    fresh = marker.exists() and marker.stat().st_mtime >= history.stat().st_mtime
    if not (fresh and _current(parquet)):
        try:
            parse_json(spark, history).write.mode("overwrite").parquet(str(parquet))
            (parquet / FORMAT_FILE).write_text(FORMAT + "\n")
        except HistoryError:
            raise
        except Exception:  # noqa: BLE001 - e.g. read-only run dir: judge straight from JSON
            return read_json(spark, history)
    try:
        return validate(spark.read.parquet(str(parquet)), history)
    except HistoryError:
        shutil.rmtree(parquet, ignore_errors=True)
        raise


def _current(parquet: Path) -> bool:
    """Whether ``parquet`` holds rows in this version's shape (see FORMAT)."""
    mark = parquet / FORMAT_FILE
    return mark.exists() and mark.read_text().strip() == FORMAT


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        if fh.tell() == 0:
            return True
        fh.seek(-1, 2)
        return fh.read(1) == b"\n"


# --- slow path: name the bad line -------------------------------------------------------


def scan_for_bad_line(history: Path) -> None:
    """Walk the file in Python and raise HistoryError at the first invalid line."""
    history = Path(history)
    for lineno, op in _numbered(history):
        check_value(lineno, op, history)


def _numbered(history: Path):
    """(line number, op) pairs; ``read_history`` does the envelope checks."""
    with open(history, encoding="utf-8") as fh:
        linenos = [i for i, line in enumerate(fh, start=1) if line.strip()]
    yield from zip(linenos, read_history(history), strict=False)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _need(cond: bool, path: Path, lineno: int, what: str) -> None:
    if not cond:
        raise HistoryError(f"{path}: line {lineno}: {what}")


def _check_pairs(items: Any, width: int, name: str, path: Path, lineno: int) -> None:
    ok = isinstance(items, list) and all(
        isinstance(x, list)
        and len(x) == width
        and isinstance(x[0], str)
        and all(_is_int(y) for y in x[1:])
        for x in items
    )
    _need(
        ok, path, lineno, f"{name} must be a list of [topic, partition{', offset' * (width - 2)}]"
    )


def check_value(lineno: int, op: dict[str, Any], path: Path) -> None:
    """Type-check the ``value`` of the operations the checkers read."""
    value, f, typ = op.get("value"), op["f"], op["type"]
    if value is None:
        _need(
            f == "poll" and typ == "invoke" or op["process"] == "nemesis" or f != "send",
            path,
            lineno,
            f"{f} {typ} needs a value object",
        )
        return
    _need(
        isinstance(value, dict),
        path,
        lineno,
        f"value must be an object or null, got {json.dumps(value)[:60]}",
    )
    if f == "send":
        _need(_is_int(value.get("value")), path, lineno, "send value.value must be an integer")
        _need(
            isinstance(value.get("topic"), str), path, lineno, "send value.topic must be a string"
        )
        if typ == "ok":
            for key in ("partition", "offset"):
                _need(
                    _is_int(value.get(key)), path, lineno, f"send ok value.{key} must be an integer"
                )
    elif f == "poll" and typ == "ok":
        records = value.get("records")
        _need(isinstance(records, list), path, lineno, "poll ok value.records must be a list")
        for r in records:
            _need(
                isinstance(r, dict)
                and isinstance(r.get("topic"), str)
                and _is_int(r.get("partition"))
                and _is_int(r.get("offset"))
                and (r.get("value") is None or _is_int(r.get("value"))),
                path,
                lineno,
                "poll record needs topic (str), partition, offset and value (int or null)",
            )
    elif f in ("rebalance", "assign"):
        for key in ("assigned", "revoked", "partitions"):
            if key in value:
                _check_pairs(value[key], 2, key, path, lineno)
    elif f == "commit" and "offsets" in value:
        _check_pairs(value["offsets"], 3, "offsets", path, lineno)
    elif op["process"] == "nemesis" and "id" in value:
        _need(_is_int(value["id"]), path, lineno, "fault id must be an integer")
