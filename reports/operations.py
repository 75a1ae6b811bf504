"""The history lines an anomaly's example names, shown as operations, not just indices.

The report streams history.jsonl once and keeps only the lines that some
example names: histories run to millions of lines.  Each line starts with
its index (harness/history.py writes ``{"index":N,...``), so lines that
are not wanted are skipped without parsing them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_OPS = 8  # operations shown per example
MAX_WHAT = 160  # characters of an operation's value shown
PREFIX = '{"index":'
NS = 1_000_000_000


def load_operations(history: Path, wanted: set[int]) -> dict[int, dict[str, Any]]:
    """The history lines with these indices, by index (those absent are left out)."""
    if not wanted or not history.exists():
        return {}
    last = max(wanted)
    found: dict[int, dict[str, Any]] = {}
    with history.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if not line.startswith(PREFIX):
                continue
            digits = line[len(PREFIX) : line.find(",", len(PREFIX))]
            if not digits.isdigit():
                continue
            index = int(digits)
            if index > last:
                break
            if index in wanted:
                try:
                    found[index] = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a partial last line of a killed run
                if len(found) == len(wanted):
                    break
    return found


def describe(value: Any) -> str:
    """An operation's value in one short line."""
    if value is None:
        return ""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return text if len(text) <= MAX_WHAT else text[: MAX_WHAT - 1] + "…"


def active_fault(t_s: float, faults: list[dict[str, Any]]) -> str | None:
    """The faults active at ``t_s`` (seconds since the history began), as "kill n2"."""
    active = []
    for f in faults:
        start, end = f.get("start_s"), f.get("end_s")
        if isinstance(start, (int, float)) and start <= t_s and (end is None or t_s <= end):
            active.append(f"{f.get('f')} {' '.join(f.get('targets') or [])}".strip())
    return ", ".join(active) or None


def operations_view(
    indices: list[int], ops: dict[int, dict[str, Any]], faults: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Rows for an example's operations table: what each named line did, and under which fault."""
    rows = []
    for i in indices[:MAX_OPS]:
        op = ops.get(i)
        if op is None:
            continue
        t_s = op.get("time", 0) / NS
        rows.append(
            {
                "index": i,
                "t_s": t_s,
                "process": op.get("process"),
                "type": op.get("type"),
                "f": op.get("f"),
                "what": describe(op.get("value")),
                "fault": active_fault(t_s, faults),
            }
        )
    return rows
