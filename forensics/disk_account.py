"""What each disk fault did, in the brokers' own words: ``disk-faults.json`` of a run.

After the heal the run has each node's server.log (``logs/<node>/logs``).
For every disk fault in the history (power loss now; disk-full and
corrupt-segment add rows by being named in ``DISK_FAULTS``), this keeps the
recovery and truncation lines (``forensics.recovery_log``) each target wrote
from the moment the fault was in effect until the next disk fault on that
node was, with per partition the log end offset the broker came back with.
"In effect" is ``applied_s`` in schedule.json (the broker killed, the cache
dropped), else the fault's start: a broker still loading its logs when the
next cut begins logs them before that cut's SIGKILL lands, and those lines
tell what the earlier cut left (seen on a loaded machine: n1's 13 "Completed
load" lines 0.2-0.3 s after the second cut's start).  That is the only
place the harness learns what reached a broker's disk before the cut.

Brokers stamp lines with wall-clock time and the history with its own
monotonic clock, so the file records the anchor between them: taken from
the live history clock during a run, else from the harness log's "in
effect at" lines (an older run directory).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from kafka_chaos.forensics.recovery_log import RecoveryLine, recovery_lines
from kafka_chaos.harness.run_files import NEMESIS, read_lines

log = logging.getLogger(__name__)

RESULT = "disk-faults.json"
DISK_FAULTS = ("power-loss", "disk-full", "corrupt-segment", "slow-disk")
MAX_LINES_PER_NODE = 400
_IN_EFFECT = re.compile(
    r"^(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ nemeses\.runner: fault .* "
    r"in effect at (?P<s>\d+(?:\.\d+)?) s"
)


def anchor_now(clock_ns: Callable[[], int]) -> dict[str, float]:
    """Both clocks read now: seconds on the history's axis and wall-clock ms."""
    return {"history_s": clock_ns() / 1e9, "wall_ms": time.time() * 1000}


def anchor_from_harness_log(run_dir: Path) -> dict[str, float] | None:
    """The anchor from the first "in effect at" line (logged in local time, ms precision)."""
    path = run_dir / "harness.log"
    if not path.is_file():
        return None
    with path.open(errors="replace") as lines:
        for line in lines:
            m = _IN_EFFECT.match(line)
            if m:
                stamp = datetime.strptime(m["stamp"], "%Y-%m-%d %H:%M:%S,%f")
                return {"history_s": float(m["s"]), "wall_ms": stamp.timestamp() * 1000}
    return None


def disk_faults(history: Path) -> list[dict[str, Any]]:
    """The disk faults of a history: id, kind, targets, start and end on its axis."""
    faults: dict[int, dict[str, Any]] = {}
    for op in read_lines(history):
        if op.get("process") != NEMESIS or op.get("f") not in DISK_FAULTS:
            continue
        v = op.get("value") or {}
        fid = v.get("id")
        if not isinstance(fid, int):
            continue
        f = faults.setdefault(
            fid, {"id": fid, "f": op["f"], "targets": [], "start_s": None, "end_s": None}
        )
        f["targets"] = list(v.get("targets") or f["targets"])
        at = v.get("at_s")
        if v.get("phase") == "start":
            f["start_s"] = at
            f["error"] = v.get("error")
        elif v.get("phase") == "end":
            f["end_s"] = at
            f["resolved"] = v.get("resolved")
    return sorted(
        (f for f in faults.values() if f["start_s"] is not None), key=lambda f: f["start_s"]
    )


def applied_at(run_dir: Path) -> dict[int, float]:
    """Each fault's ``applied_s`` (when it was in effect) from schedule.json, by id."""
    try:
        ops = json.loads((run_dir / "schedule.json").read_text()).get("ops") or []
    except (OSError, ValueError, AttributeError):
        return {}
    return {
        op["id"]: op["applied_s"]
        for op in ops
        if isinstance(op, dict) and isinstance(op.get("id"), int)
        and isinstance(op.get("applied_s"), (int, float))
    }  # fmt: skip


def node_lines(run_dir: Path, node: str, topic: str) -> list[RecoveryLine]:
    """``node``'s recovery lines for ``topic`` from its collected server.log files, oldest first."""
    logs = run_dir / "logs" / node / "logs"
    files = sorted(logs.glob("server.log*"), key=_rotation_order) if logs.is_dir() else []
    found: list[RecoveryLine] = []
    for path in files:
        with path.open(errors="replace") as lines:
            found.extend(recovery_lines(lines, topic))
    return found


def _rotation_order(path: Path) -> tuple[int, str]:
    """server.log.2025-... (older, rotated) before server.log (current)."""
    return (1 if path.name == "server.log" else 0, path.name)


def account(run_dir: Path, topic: str, anchor: dict[str, float] | None = None) -> dict[str, Any]:
    """The account of every disk fault of the run (see the module doc)."""
    run_dir = Path(run_dir)
    anchor = anchor or anchor_from_harness_log(run_dir)
    faults = disk_faults(run_dir / "history.jsonl")
    result: dict[str, Any] = {"topic": topic, "anchor": anchor, "faults": []}
    if not faults:
        return result
    if anchor is None:
        result["error"] = "no anchor between broker time and the history's clock"
        return result

    def on_axis(ms: int) -> float:
        return round(anchor["history_s"] + (ms - anchor["wall_ms"]) / 1000, 3)

    nodes = sorted({n for f in faults for n in f["targets"]})
    lines = {n: node_lines(run_dir, n, topic) for n in nodes}
    applied = applied_at(run_dir)
    for f in faults:
        f["from_s"] = applied.get(f["id"], f["start_s"])
    for i, fault in enumerate(faults):
        row = {**fault, "nodes": {}}
        for node in fault["targets"]:
            later = [g["from_s"] for g in faults[i + 1 :] if node in g["targets"]]
            until = later[0] if later else float("inf")
            mine = [
                ln
                for ln in lines.get(node, [])
                if ln.time_ms is not None and fault["from_s"] <= on_axis(ln.time_ms) < until
            ]
            row["nodes"][node] = node_summary(mine, on_axis)
        result["faults"].append(row)
    return result


def node_summary(lines: list[RecoveryLine], on_axis: Callable[[int], float]) -> dict[str, Any]:
    """Counts by kind, the log end each partition came back with, and the lines themselves."""
    recovered: dict[int, int] = {}
    for ln in lines:
        if ln.kind == "loaded" and ln.partition is not None and ln.offset is not None:
            recovered.setdefault(ln.partition, ln.offset)  # the first load after the fault
    kept = [{**ln.as_dict(), "history_s": on_axis(ln.time_ms or 0)} for ln in lines]
    return {
        "counts": dict(Counter(ln.kind for ln in lines)),
        "recovered_log_end": {str(p): o for p, o in sorted(recovered.items())},
        "unclean_elections": sorted(
            {
                ln.partition
                for ln in lines
                if ln.kind == "unclean-election" and ln.partition is not None
            }
        ),
        "lines": kept[:MAX_LINES_PER_NODE],
        "lines_dropped": max(0, len(kept) - MAX_LINES_PER_NODE),
    }


def write(run_dir: Path, topic: str, clock_ns: Callable[[], int] | None = None) -> dict[str, Any]:
    """Write ``disk-faults.json`` (after the logs were collected) when the run had disk faults."""
    result = account(Path(run_dir), topic, anchor_now(clock_ns) if clock_ns else None)
    if result["faults"] or result.get("error"):  # a run without disk faults gets no file
        (Path(run_dir) / RESULT).write_text(json.dumps(result, indent=1) + "\n")
    return result
