"""The report's section on what the coordinators persisted, from coordinators.json
(forensics/coordinator_state.py).  Absent for runs that do not keep it.

Why here: a share-group or commit finding is explained by the broker's
state, not only by what clients saw, and the reader of a report should see
that state beside the finding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka_chaos.reports.inputs import as_dict, as_list, load_json

STATES = {0: "available", 1: "acquired", 2: "acknowledged", 4: "archived"}


def coordinators_section(run_dir: Path) -> dict[str, Any] | None:
    loaded = load_json(run_dir / "coordinators.json")
    if loaded.missing:
        return None  # this run did not keep it (coordinator_state.wanted)
    data = as_dict(loaded.data)
    if data.get("error"):
        return {"missing": f"the coordinators' state could not be kept: {data['error']}"}
    share = [as_dict(p) for p in as_list(data.get("share_partitions"))]
    commits = [as_dict(p) for p in as_list(data.get("commits"))]
    for p in share:
        p["in_flight_text"] = in_flight_text(as_list(p.get("in_flight")))
    findings = [
        f"Share-partition {p.get('partition')}: the persisted start offset went back from "
        f"{b.get('from')} to {b.get('to')} at {b.get('history_s')} s."
        for p in share
        for b in (as_dict(x) for x in as_list(p.get("start_offset_backwards")))
    ] + [
        f"Partition {p.get('partition')}: the coordinator wrote a commit of {w.get('to')} after "
        f"one of {w.get('from')} (at {w.get('history_s')} s)."
        for p in commits
        for w in (as_dict(x) for x in as_list(p.get("went_lower")))
    ]
    return {
        "state_topic": data.get("state_topic"),
        "groups": as_list(data.get("groups")),
        "share": share,
        "commits": commits,
        "findings": findings,
        "raw": as_list(data.get("raw")),
    }


def in_flight_text(ranges: list[Any], limit: int = 6) -> str:
    """``[[first, last, state, count], ...]`` in words: "12-15 available ×2, ..."."""
    words = []
    for r in ranges[:limit]:
        if isinstance(r, list) and len(r) == 4:
            first, last, state, count = r
            span = f"{first}" if first == last else f"{first}–{last}"
            words.append(f"{span} {STATES.get(state, state)} ×{count}")
    more = f", … {len(ranges) - limit} more" if len(ranges) > limit else ""
    return (", ".join(words) + more) or "none"
