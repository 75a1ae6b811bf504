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
from typing import Any, Protocol


@dataclass(frozen=True)
class Column:
    """A column of the rows table (``checkers.ingest.line_rows.ROWS``) that a
    line kind's rows hold beyond the history contract's own.

    ``type``: ``int32``, ``int64``, ``string`` or ``pairs`` (a list of
    [topic, partition], read from the line as such).  ``on``: the kinds of
    row (``checkers.ingest.line_rows.KINDS``) written with it; every other
    kind leaves it out of its files, since a column that is null in every row
    still costs the writer time.
    """

    name: str
    type: str
    on: tuple[str, ...]


@dataclass(frozen=True)
class LineKind:
    """A history line ``f`` the workload writes, and how it becomes rows.

    ``problem(value, type)``: what is wrong with a line's ``value`` (None:
    nothing), in the words ingest gives after the line's number.
    ``rows(line, value, invoke)``: the rows of one line of this kind (schema
    ``checkers.ingest.line_rows.ROWS``), given the row ingest made of the
    line's common fields; ``invoke``: for a completion of a ``paired`` kind,
    the index of its invoke line (-1 while ingest cannot know it yet), else
    None.  Rows whose ``f`` is none of ``stored`` are ``control`` rows.
    ``needs_value``: a line of this kind without a value is refused.
    ``columns``: the row columns of its own; every other row holds null there.
    ``stored``: kinds of row kept in Parquet partitions of their own, each with
    the columns written to it: rows of that ``f``.
    ``paired``: each completion is paired with its process's invoke.
    ``arrow``: the module of ingest's Arrow fast path for these lines (a
    "module" name, imported by ingest: the checkers' floor is above this
    one); without one its lines are parsed line by line.

    Ingest builds its schema when it loads: a kind ``register`` ed later
    (a test's) may make rows of the columns and kinds known by then only.
    """

    f: str
    problem: Callable[[dict[str, Any], str], str | None]
    rows: Callable[[dict[str, Any], dict[str, Any], int | None], list[dict[str, Any]]]
    needs_value: bool = False
    columns: tuple[Column, ...] = ()
    stored: tuple[tuple[str, tuple[str, ...]], ...] = ()
    paired: bool = False
    arrow: str | None = None


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


class RowsFacts(Protocol):
    """What a history's ingested rows say, read mostly from Parquet metadata
    (``checkers/history_workload.py`` gives them; ``kind``: a partition of
    the rows, ``checkers.ingest.line_rows.KINDS``)."""

    def count(self, kind: str) -> int:
        """How many rows of ``kind`` there are."""

    def any_valid(self, kind: str, column: str) -> bool:
        """Whether a row of ``kind`` holds a value in ``column``."""

    def distinct(self, kind: str, column: str) -> list[str]:
        """The values of ``column`` in the rows of ``kind``."""

    def plain_polls(self) -> bool:
        """Whether a poll line lies outside every transaction and the final drain."""


@dataclass(frozen=True)
class Shown:
    """What a history's lines show of the workload that wrote them, so that a
    history checked without its config is judged as what it is, and one
    whose config contradicts its lines is refused (checkers/history_workload.py).

    ``name``: what such lines are called in that refusal (``txn``, ``share``).
    ``seen(facts)``: whether the ingested rows show it.
    ``strength``: ``own``, lines only this workload writes (asked first);
    ``mode``, lines of one of its settings (asked after every ``own``);
    ``plain``, lines most workloads write (asked only to refuse a config
    that says otherwise, never to choose one).
    ``implies(facts, config)``: the settings such lines imply, set in the
    config a history without one is judged by (a copy of the defaults, set
    to this workload).
    ``said(spec)``: whether a run with these settings (a ``TestSpec``) writes
    such lines; what its config says is the first of its workload's that holds.
    """

    name: str
    seen: Callable[[RowsFacts], bool]
    strength: str = "own"
    implies: Callable[[RowsFacts, dict[str, Any]], None] = lambda facts, config: None
    said: Callable[[Any], bool] = lambda spec: True
