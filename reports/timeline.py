"""Per-second throughput/latency and fault windows, streamed from a history.

A history can hold millions of lines, so it is read once, line by line, and
aggregated per second; latencies of a second are reduced to percentiles as
soon as the history has moved past that second (lines are time-ordered).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_chaos.checkers import fault_plan
from kafka_chaos.harness.errors import HistoryError
from kafka_chaos.harness.history import NEMESIS, read_history
from kafka_chaos.reports import svg
from kafka_chaos.reports.inputs import as_dict, as_list

NS = 1_000_000_000
COUNT_KEYS = ("acked", "failed", "info", "polled")
PLAN_KEYS = ("planned_start_s", "realised_start_s", "planned_end_s", "realised_end_s")


@dataclass
class HistorySummary:
    """What the report needs from a history when results.json lacks it."""

    timeline: list[dict[str, Any]] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    ops: int = 0
    duration_s: float = 0.0
    problem: str | None = None  # why reading stopped early, if it did


def percentile(sorted_vals: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_vals:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(sorted_vals)))
    return sorted_vals[min(rank, len(sorted_vals)) - 1]


class _Aggregator:
    def __init__(self) -> None:
        self.rows: dict[int, dict[str, Any]] = {}
        self.pending: dict[int, list[float]] = {}  # second -> send latencies (ms)
        self.invokes: dict[Any, int] = {}  # process -> send invoke time (ns)
        self.faults: dict[Any, dict[str, Any]] = {}
        self.fault_order: list[Any] = []
        self.last_time = 0
        self.ops = 0

    def row(self, second: int) -> dict[str, Any]:
        if second not in self.rows:
            self.rows[second] = {"t": second, **dict.fromkeys(COUNT_KEYS, 0)}
        return self.rows[second]

    def add(self, op: dict[str, Any]) -> None:
        self.ops += 1
        t = op["time"]
        self.last_time = max(self.last_time, t)
        second = t // NS
        self._flush_before(second)
        if op["process"] == NEMESIS:
            self._fault(op, t)
            return
        f, typ, value = op["f"], op["type"], op.get("value")
        if f == "send":
            if typ == "invoke":
                self.invokes[op["process"]] = t
                return
            started = self.invokes.pop(op["process"], None)
            key = {"ok": "acked", "fail": "failed"}.get(typ, "info")
            self.row(second)[key] += 1
            if typ == "ok" and started is not None:
                self.pending.setdefault(second, []).append((t - started) / 1e6)
        elif f == "poll" and typ == "ok" and isinstance(value, dict):
            self.row(second)["polled"] += len(value.get("records") or ())
        elif f == "crash":
            self.invokes.pop(op["process"], None)

    def _fault(self, op: dict[str, Any], t: int) -> None:
        value = op.get("value") if isinstance(op.get("value"), dict) else {}
        fid = value.get("id", f"anon-{op['index']}")
        if value.get("phase") == "start":
            self.faults[fid] = {
                "id": fid,
                "f": op["f"],
                "targets": value.get("targets") or [],
                "start_s": t / NS,
                "end_s": None,
                "planned_start_s": _seconds(value.get("planned_s")),
                "realised_start_s": _seconds(value.get("at_s")),
                "planned_end_s": None,
                "realised_end_s": None,
            }
            self.fault_order.append(fid)
        elif value.get("phase") == "end" and fid in self.faults:
            self.faults[fid].update(
                end_s=t / NS,
                planned_end_s=_seconds(value.get("planned_s")),
                realised_end_s=_seconds(value.get("at_s")),
            )

    def _flush_before(self, second: int) -> None:
        for s in [s for s in self.pending if s < second]:
            self._finish(s)

    def _finish(self, second: int) -> None:
        lats = sorted(self.pending.pop(second))
        self.row(second).update(
            lat_p50_ms=percentile(lats, 50), lat_p99_ms=percentile(lats, 99), lat_max_ms=lats[-1]
        )

    def summary(self, problem: str | None) -> HistorySummary:
        for s in list(self.pending):
            self._finish(s)
        end_s = self.last_time / NS
        last = int(end_s)
        timeline = (
            [
                self.rows.get(s) or {"t": s, **dict.fromkeys(COUNT_KEYS, 0)}
                for s in range(0, last + 1)
            ]
            if self.ops
            else []
        )
        faults = []
        for fid in self.fault_order:
            fault = dict(self.faults[fid])
            healed = fault["end_s"] is not None
            if not healed:  # harness died mid-fault: it lasted to the end
                fault["end_s"] = end_s
                fault["unhealed"] = True
            edges = [fault.pop(k) for k in PLAN_KEYS]
            fault.update(fault_plan.plan_fields(*edges, healed=healed))
            faults.append(fault)
        return HistorySummary(timeline, faults, self.ops, end_s, problem)


def _seconds(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def summarize_history(path: Path) -> HistorySummary:
    """Stream ``path`` once; a malformed line ends reading and is reported, not raised."""
    agg = _Aggregator()
    problem = None
    try:
        for op in read_history(path):
            agg.add(op)
    except HistoryError as e:
        problem = str(e)
    except UnicodeDecodeError as e:
        problem = f"{path}: not UTF-8 after {agg.ops} lines ({e.reason})"
    except OSError as e:
        problem = f"{path}: cannot read: {e.strerror or e}"
    return agg.summary(problem)


def finite(v: Any) -> float | None:
    """A JSON number as a float; None for anything else (a bool, NaN, a string)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        return None
    return float(v)


def fault_bands(faults: Sequence[dict[str, Any]]) -> list[svg.Band]:
    bands = []
    for fault in faults:
        start, end = finite(fault.get("start_s")), finite(fault.get("end_s"))
        if start is None:
            continue
        targets = ",".join(map(str, as_list(fault.get("targets"))))
        label = f"{fault.get('f', '?')} {targets}".strip()
        title = f"fault {fault.get('id', '?')}: {label}, {start:.1f}s–" + (
            f"{end:.1f}s" if end is not None else "end"
        )
        bands.append(svg.Band(start, end if end is not None else start, label, title))
    return bands


@dataclass
class RunTimeline:
    """A run's per-second rows and faults, as the report draws them."""

    rows: list[dict[str, Any]]
    faults: list[dict[str, Any]]
    availability: dict[str, Any]
    source: str  # where the rows came from: results.json or history.jsonl
    problem: str | None = None  # why reading the history stopped early, if it was read
    ops: int | None = None  # the history's lines, if it was read


def run_timeline(run_dir: Path, results: dict[str, Any]) -> RunTimeline:
    """The checkers' own timeline and faults (results.json); what they lack is taken
    from one read of the history, so that a run whose check failed still has both."""
    avail = as_dict(as_dict(results.get("stats")).get("availability"))
    found = RunTimeline(
        as_list(avail.get("timeline")), as_list(avail.get("faults")), avail, "results.json"
    )
    history = run_dir / "history.jsonl"
    if (not found.rows or "faults" not in avail) and history.exists():
        summary = summarize_history(history)
        found.problem, found.ops = summary.problem, summary.ops
        if not found.rows:
            found.rows, found.source = summary.timeline, "history.jsonl"
        if "faults" not in avail:
            found.faults = summary.faults
    found.faults = [as_dict(f) for f in found.faults]
    return found


def run_faults(run_dir: Path, results: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's faults as the timeline draws them."""
    return run_timeline(run_dir, results).faults
