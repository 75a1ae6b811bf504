"""Faults off plan: when each fault really started and ended, against its schedule.

The nemesis writes on every fault line, in seconds since the schedule
started, when the schedule planned that edge (``planned_s``) and when it
really happened (``at_s``; docs/history.md).  A fault applied or healed late
shifts or stretches its window, so the throughput "during" and "before" it
no longer measure what the plan says.  That is a caveat on the statistics,
not a broken promise, so it is a flag in results.json, never an anomaly, and
the verdict ignores it.

Plain Python on a few dicts per history: no Spark here, so the report can
use it on a history's faults too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TOLERANCE_S = 1.0  # a fault edge further than this from its plan is off plan
ENTRY = (
    "id",
    "f",
    "targets",
    "planned_start_s",
    "realised_start_s",
    "planned_end_s",
    "realised_end_s",
    "deviation_s",
    "healed",
    "indices",
)


def deviation(
    planned_start: float | None,
    realised_start: float | None,
    planned_end: float | None,
    realised_end: float | None,
) -> float | None:
    """The larger distance (s) of either edge from its plan; None if neither edge
    has both figures (histories written before the nemesis recorded them)."""
    gaps = [
        abs(real - plan)
        for plan, real in ((planned_start, realised_start), (planned_end, realised_end))
        if plan is not None and real is not None
    ]
    return round(max(gaps), 3) if gaps else None


def off_plan(deviation_s: float | None, healed: bool) -> bool:
    """A fault never healed (no end line) is off plan; otherwise only a known
    deviation beyond ``TOLERANCE_S`` is: missing figures mean no deviation known."""
    return not healed or (deviation_s is not None and deviation_s > TOLERANCE_S)


def plan_fields(
    planned_start: float | None,
    realised_start: float | None,
    planned_end: float | None,
    realised_end: float | None,
    healed: bool,
) -> dict[str, Any]:
    """The plan-related fields of one fault in ``stats.availability.faults``."""
    dev = deviation(planned_start, realised_start, planned_end, realised_end)
    return {
        "planned_start_s": planned_start,
        "realised_start_s": realised_start,
        "planned_end_s": planned_end,
        "realised_end_s": realised_end,
        "deviation_s": dev,
        "healed": healed,
        "off_plan": off_plan(dev, healed),
    }


def summary(faults: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """results.json's ``faults_off_plan`` from a history's faults (with ``plan_fields``)."""
    late = [{k: f.get(k) for k in ENTRY} for f in faults if f.get("off_plan")]
    known = [f["deviation_s"] for f in faults if f.get("deviation_s") is not None]
    return {
        "tolerance_s": TOLERANCE_S,
        "count": len(late),
        "worst_deviation_s": max(known, default=None),
        "faults": late,
    }
