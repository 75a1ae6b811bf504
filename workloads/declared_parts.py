"""The parts of a workload's declaration that other packages read.

Why apart from ``workloads/registry.py``: these are plain records the
checkers (a line kind) and the report (a section) take from a declaration,
so a workload brings them without any of those packages naming it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LineKind:
    """A history line ``f`` the workload writes, and how it becomes rows.

    ``problem(value)``: what is wrong with a line's ``value`` (None: nothing),
    so ingest names the line.  ``rows(line, value)``: the rows of one line of
    this kind (schema ``checkers.ingest.line_rows.ROWS``), given the row ingest made
    of the line's common fields.  They are stored as ``control`` rows.
    """

    f: str
    problem: Callable[[dict[str, Any]], str | None]
    rows: Callable[[dict[str, Any], dict[str, Any]], list[dict[str, Any]]]


@dataclass(frozen=True)
class ReportSection:
    """A section of the run's HTML report: ``html(run_dir, config, results)`` is
    its body (escaped by the workload), or None to leave it out of this run's.

    ``html`` may be a "module:function" name instead, imported when a report is
    drawn: a section drawn with the report package's own charts (the mirror
    workload's, reports/mirror.py) is declared here without the workload
    importing the floor above it.
    """

    id: str
    title: str
    html: Callable[[Path, dict[str, Any], dict[str, Any]], str | None] | str

    def body(self, run_dir: Path, config: dict[str, Any], results: dict[str, Any]) -> str | None:
        draw = self.html
        if isinstance(draw, str):
            module, _, name = draw.partition(":")
            draw = getattr(importlib.import_module(module), name)
        return draw(run_dir, config, results)
