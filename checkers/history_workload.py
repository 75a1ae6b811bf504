"""Which workload a history's lines show, so that a check is never partial unnoticed.

A transactional history judged under a queue config runs only the queue
checks and may answer ``valid`` without one transactional or cycle check;
that looks exactly like a full check.  So ``kafka-chaos check`` holds the
config it judges by against the lines themselves: a history checked without
any config is judged as what its lines show, and a config that contradicts
them is refused in one line.

The evidence comes from the Parquet rows ingest made (checkers/ingest/convert.py),
mostly from file metadata: a transactional history has ``kind=txn`` rows,
a consume-transform-produce one sends with a ``source``, a share-group one
has ``share-*`` lines, and a plain queue consumer polls outside any
transaction and outside the final drain.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
from kafka_chaos.checkers.spec_view import CheckedSpec
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.workloads.registry import declared


def config_for(
    rows: Path, history: Path, config: dict[str, Any], from_lines: bool
) -> dict[str, Any]:
    """The config to judge ``history`` (its ingested ``rows``) by.

    ``from_lines``: no config was given or found, so ``config`` holds the
    defaults and the workload is taken from the lines.  Otherwise a config
    whose workload the lines contradict is refused (ConfigError, one line).
    """
    shown = _shown(rows)
    if from_lines:
        judged = copy.deepcopy(config)
        if shown == "txn":
            judged["workload"] = "txn"
            ctp = _any_valid(rows, "line", "source")  # sends that copy an input
            judged.setdefault("txn", {})["mode"] = "ctp" if ctp else "mixed"
        elif shown == "share":
            judged.setdefault("consumer", {})["mode"] = "share"
        return judged
    said = _workload_of(config)
    if shown is None and said != "queue" and _plain_polls(rows):
        shown = "queue"  # only read when it could contradict the config
    if shown is not None and shown != said:
        raise ConfigError(
            f"{history}: its lines are a {shown} history but its config says {said}; "
            "check it with the run's own config (--config)"
        )
    return config


def _shown(rows: Path) -> str | None:
    """``txn`` or ``share`` when the lines show that workload, else None."""
    if _rows(rows, "txn") > 0:
        return "txn"
    if any(f.startswith("share-") for f in _distinct(rows, "control", "f")):
        return "share"
    return None


def _workload_of(config: dict[str, Any]) -> str:
    """What the lines of a history under ``config`` show: txn, share or queue
    (the workload declares txn or queue; share consumers make queue lines share)."""
    spec = CheckedSpec.of(config)
    shown = declared(spec.workload).shown_as
    return "share" if shown == "queue" and spec.share else shown


def _part(rows: Path, kind: str) -> Path:
    return Path(rows) / f"kind={kind}" / "part-0.parquet"


def _rows(rows: Path, kind: str) -> int:
    path = _part(rows, kind)
    return pq.ParquetFile(path).metadata.num_rows if path.exists() else 0


def _any_valid(rows: Path, kind: str, column: str) -> bool:
    """Whether ``column`` holds a non-null value, from the row groups' statistics
    where they have them (reading the column otherwise)."""
    path = _part(rows, kind)
    if not path.exists():
        return False
    meta = pq.ParquetFile(path).metadata
    if column not in meta.schema.names:
        return False
    at = meta.schema.names.index(column)
    counted = True
    for i in range(meta.num_row_groups):
        chunk = meta.row_group(i).column(at)
        stats = chunk.statistics
        if stats is None or not stats.has_null_count:
            counted = False
            break
        if stats.null_count < chunk.num_values:
            return True
    if counted:
        return False
    return pq.read_table(path, columns=[column])[column].null_count < _rows(rows, kind)


def _distinct(rows: Path, kind: str, column: str) -> list[str]:
    path = _part(rows, kind)
    if not path.exists() or _rows(rows, kind) == 0:
        return []
    values = pc.unique(pq.read_table(path, columns=[column])[column])
    return [v for v in values.to_pylist() if v is not None]


def _plain_polls(rows: Path) -> bool:
    """A poll line outside every transaction and the final drain."""
    path = _part(rows, "line")
    if not path.exists() or _rows(rows, "line") == 0:
        return False
    table = pq.read_table(path, columns=["f", "final", "txn"])
    plain = pc.and_(
        pc.and_(pc.equal(table["f"], "poll"), pc.invert(table["final"].fill_null(False))),
        pc.is_null(table["txn"]),
    )
    return bool(pc.any(plain).as_py())
