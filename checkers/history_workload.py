"""Which workload a history's lines show, so that a check is never partial unnoticed.

A transactional history judged under a queue config runs only the queue
checks and may answer ``valid`` without one transactional or cycle check;
that looks exactly like a full check.  So ``kafka-chaos check`` holds the
config it judges by against the lines themselves: a history checked without
any config is judged as what its lines show, and a config that contradicts
them is refused in one line.

How the lines are recognised is each workload's to declare
(``Declaration.shown``, ``workloads.declared_parts.Shown``), and this module
asks every declaration.  The evidence comes from the Parquet rows ingest made
(checkers/ingest/convert.py), mostly from file metadata (``RowsFacts``): a
transactional history has ``kind=txn`` rows, a consume-transform-produce one
sends with a ``source``, a share-group one has ``share-*`` lines, and a plain
queue consumer polls outside any transaction and outside the final drain.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
from kafka_chaos.checkers.spec_view import CheckedSpec
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.workloads import registry as workloads
from kafka_chaos.workloads.declared_parts import Shown


def config_for(
    rows: Path, history: Path, config: dict[str, Any], from_lines: bool
) -> dict[str, Any]:
    """The config to judge ``history`` (its ingested ``rows``) by.

    ``from_lines``: no config was given or found, so ``config`` holds the
    defaults and the workload is taken from the lines.  Otherwise a config
    whose workload the lines contradict is refused (ConfigError, one line).
    """
    facts = RowsFacts(rows)
    found = _shown(facts)
    if from_lines:
        judged = copy.deepcopy(config)
        if found is not None:
            workload, shown = found
            if workload != CheckedSpec.of(judged).workload:  # the defaults may say it already
                judged["workload"] = workload
            shown.implies(facts, judged)
        return judged
    said = _said(config)
    if found is None:  # plain lines are only read when they could contradict the config
        plain = (s for _, s in workloads.shown() if s.strength == "plain" and s.name != said)
        found = next(((None, s) for s in plain if s.seen(facts)), None)
    if found is not None and found[1].name != said:
        raise ConfigError(
            f"{history}: its lines are a {found[1].name} history but its config says {said}; "
            "check it with the run's own config (--config)"
        )
    return config


def _shown(facts: RowsFacts) -> tuple[str | None, Shown] | None:
    """(workload, what its lines show) when the lines show one: the workloads'
    own lines first, then their settings' lines; None if neither."""
    declared = workloads.shown()
    for strength in ("own", "mode"):
        for workload, shown in declared:
            if shown.strength == strength and shown.seen(facts):
                return workload, shown
    return None


def _said(config: dict[str, Any]) -> str:
    """What the lines of a history under ``config`` show: the first of its
    workload's ``Shown`` that its settings write (the workload's name if none)."""
    spec = CheckedSpec.of(config).spec
    shown = workloads.declared(spec.workload).shown
    return next((s.name for s in shown if s.said(spec)), spec.workload)


class RowsFacts:
    """What the ingested rows of a history say (``workloads.declared_parts.RowsFacts``),
    from the Parquet files' metadata where it holds the answer."""

    def __init__(self, rows: Path) -> None:
        self.rows = Path(rows)

    def _part(self, kind: str) -> Path:
        return self.rows / f"kind={kind}" / "part-0.parquet"

    def count(self, kind: str) -> int:
        path = self._part(kind)
        return pq.ParquetFile(path).metadata.num_rows if path.exists() else 0

    def any_valid(self, kind: str, column: str) -> bool:
        """Whether ``column`` holds a non-null value, from the row groups' statistics
        where they have them (reading the column otherwise)."""
        path = self._part(kind)
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
        return pq.read_table(path, columns=[column])[column].null_count < self.count(kind)

    def distinct(self, kind: str, column: str) -> list[str]:
        path = self._part(kind)
        if not path.exists() or self.count(kind) == 0:
            return []
        values = pc.unique(pq.read_table(path, columns=[column])[column])
        return [v for v in values.to_pylist() if v is not None]

    def plain_polls(self) -> bool:
        """A poll line outside every transaction and the final drain."""
        path = self._part("line")
        if not path.exists() or self.count("line") == 0:
            return False
        table = pq.read_table(path, columns=["f", "final", "txn"])
        plain = pc.and_(
            pc.and_(pc.equal(table["f"], "poll"), pc.invert(table["final"].fill_null(False))),
            pc.is_null(table["txn"]),
        )
        return bool(pc.any(plain).as_py())
