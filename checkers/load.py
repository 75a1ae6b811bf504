"""A history as a Spark DataFrame of rows, through its Parquet cache.

``checkers/ingest.py`` turns ``history.jsonl`` into the rows table once and
caches it as ``history.parquet`` beside the history, so a re-check (or the
report) skips the parse.  The cache is rebuilt when the history is newer or
the cache was made by a version with another row shape.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from checkers import ingest
from harness.errors import HistoryError

PARQUET_NAME = "history.parquet"
# Sizes on disk per operation, for a guess made before anything is read
# (synthetic and harness histories: about 200 bytes a JSONL line, 21 bytes of
# Parquet rows per line).
JSONL_BYTES_PER_OP = 200
PARQUET_BYTES_PER_OP = 21


def expected_ops(history: Path) -> int:
    """About how many operations ``history`` holds, from its size alone (0 if absent)."""
    history = Path(history)
    if history.is_dir():
        size = sum(f.stat().st_size for f in history.rglob("*.parquet"))
        return size // PARQUET_BYTES_PER_OP
    return history.stat().st_size // JSONL_BYTES_PER_OP if history.is_file() else 0


def load_history(spark: SparkSession, history: Path) -> DataFrame:
    """The rows of ``history`` (JSONL, or a Parquet directory written by ingest)."""
    return read_rows(spark, rows_dir(history))


def read_rows(spark: SparkSession, rows: Path) -> DataFrame:
    """The Parquet rows directory ``rows`` with every column of the rows table:
    ingest writes each kind of row without the columns it never holds, and
    Spark reads those as nulls."""
    return spark.read.schema(from_arrow_schema(ingest.ROWS_TABLE)).parquet(str(rows))


def rows_dir(history: Path) -> Path:
    """The Parquet rows directory of ``history``: itself, or its (re)made cache."""
    history = Path(history)
    if history.suffix == ".parquet" or history.is_dir():
        if not ingest.is_current(history):
            raise HistoryError(
                f"{history}: not a Parquet history of this kafka-chaos version ({ingest.FORMAT}); "
                "check the history.jsonl it came from"
            )
        return history
    return rows_cache(history)


def rows_cache(history: Path) -> Path:
    """An up-to-date Parquet rows directory for ``history``, made if needed.

    It goes beside the history; when that directory is read-only, into a
    temporary directory removed when the process exits.
    """
    parquet = history.with_suffix(".parquet")
    marker = parquet / "_SUCCESS"
    if not history.is_file():
        raise HistoryError(f"{history}: no such history file")
    if marker.exists() and marker.stat().st_mtime >= history.stat().st_mtime:
        if ingest.is_current(parquet):
            return parquet
    try:
        ingest.convert(history, parquet)
    except PermissionError:
        scratch = Path(tempfile.mkdtemp(prefix="kafka-chaos-rows-"))
        atexit.register(shutil.rmtree, scratch, True)
        parquet = scratch / PARQUET_NAME
        ingest.convert(history, parquet)
    return parquet
