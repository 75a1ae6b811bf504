"""A history as a Spark DataFrame of rows, through its Parquet cache.

``checkers/ingest/convert.py`` turns ``history.jsonl`` into the rows table once and
caches it as ``history.parquet`` beside the history, so a re-check (or the
report) skips the parse; a run writes it while it records, so its first
check skips the parse too.  The cache is rebuilt when it does not cover the
whole history or was made by a version with another row shape.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from pathlib import Path

from kafka_chaos.checkers.ingest import convert as ingest
from kafka_chaos.checkers.ingest import recorded_rows
from kafka_chaos.harness.errors import HistoryError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

log = logging.getLogger(__name__)

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

    A run writes it while it records (``checkers.ingest.recorded_rows``), and so
    does a check that made it before; either way it is used when it covers
    the whole history (``ingest.Covers``) and was finished after the
    history's last write.  Otherwise (no rows, a run killed before it
    finished them, a history that grew, another version's rows) it is
    rebuilt from the history, which is always the truth, and the log says
    why.  It goes beside the history; when that directory is read-only,
    into a temporary directory removed when the process exits.
    """
    parquet = history.with_suffix(".parquet")
    if not history.is_file():
        raise HistoryError(f"{history}: no such history file")
    recorded_rows.wait_until_written(parquet)  # a run's check: its recorder may be finishing
    stale = why_stale(history, parquet)
    if stale is None:
        log.debug("%s covers %s: checking from it", parquet.name, history.name)
        return parquet
    log.info("%s %s: building it from %s", parquet.name, stale, history.name)
    _remove_orphans(parquet)
    try:
        ingest.convert(history, parquet)
    except PermissionError:
        scratch = Path(tempfile.mkdtemp(prefix="kafka-chaos-rows-"))
        atexit.register(shutil.rmtree, scratch, True)
        parquet = scratch / PARQUET_NAME
        ingest.convert(history, parquet)
    return parquet


def why_stale(history: Path, parquet: Path) -> str | None:
    """Why the rows directory ``parquet`` is not ``history``'s rows (None if it is)."""
    if not parquet.is_dir():
        return "is missing"
    if not ingest.is_current(parquet):
        return f"was made by another version (not {ingest.FORMAT})"
    covers = ingest.covers(parquet)
    if covers is None:
        return "is unfinished (no mark of what it covers)"
    size = history.stat().st_size
    if covers.bytes != size:
        return f"covers {covers.bytes} of the history's {size} bytes"
    if (parquet / "_SUCCESS").stat().st_mtime < history.stat().st_mtime:
        return "is older than the history"
    return None


def _remove_orphans(parquet: Path) -> None:
    """Remove rows directories left half-written by a process that no longer
    runs (``.NAME.PID.tmp``: a run or a check killed while writing)."""
    for tmp in parquet.parent.glob(f".{parquet.name}.*.tmp"):
        pid = tmp.name.removeprefix(f".{parquet.name}.").removesuffix(".tmp")
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
