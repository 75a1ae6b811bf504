"""The mirror checks in plain Python: the reference the Spark checks must agree with.

Definitions (docs/results.md, checkers/mirror/mirror_checks.py): a topic or group
named ``dc2/<name>`` is dc2's, anything else dc1's; a value is a copy on dc2
when it was sent to dc1; a cluster's log is what its final drain read.

- mirror-lost: in dc1's log at an offset up to MirrorMaker's recorded
  progress of its partition (``mirror-caught-up``'s ``copied``), not in dc2's.
- failover-skip: a copy in dc2's log, below the highest offset the group
  read in that dc2 partition, read by the group on neither cluster.
- failover-reread: read by the group on dc1 and on dc2.
- mirror-partition: a copy whose first dc2 position is in another partition
  than its first dc1 position.
- mirror-order: a copy in its dc1 partition on dc2 too, before the first dc2
  position of the value that precedes it in its dc1 partition, when that one
  kept its partition too.
- mirror-duplicate: a copy at more than one dc2 position.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from kafka_chaos.checkers.catalog import names

PREFIX = "dc2/"
Pos = tuple[str, int, int]  # topic, partition, offset


def _dc2(name: str) -> bool:
    return name.startswith(PREFIX)


def _base(name: str) -> str:
    return name.removeprefix(PREFIX)


def judge_mirror(ops: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """{check: anomalies} of one history (or of several with distinct names)."""
    ops = list(ops)
    sent_to_dc1: set[int] = set()
    group_of: dict[Any, str] = {}
    logs: dict[bool, dict[int, list[Pos]]] = {False: defaultdict(list), True: defaultdict(list)}
    reads: dict[tuple[str, bool], set[int]] = defaultdict(set)  # (group, dc2) -> values
    reach: dict[tuple[str, str, int], int] = {}  # (group, dc2 topic, partition) -> max offset
    copied: dict[tuple[str, int], int] = {}
    for op in ops:
        v, f = op.get("value") or {}, op["f"]
        if f == "send" and op["type"] == "invoke" and not _dc2(v["topic"]):
            sent_to_dc1.add(v["value"])
        elif f in ("subscribe", "assign") and op["type"] == "invoke" and not v.get("final"):
            group_of.setdefault(op["process"], v["group"])
        elif f == "mirror-caught-up":
            for topic, p, o in v.get("copied") or []:
                copied[(topic, p)] = max(copied.get((topic, p), -1), o)
        elif f == "poll" and op["type"] == "ok":
            final = bool(v.get("final"))
            for r in v.get("records") or []:
                if r.get("value") is None:
                    continue
                pos = (r["topic"], r["partition"], r["offset"])
                if final:
                    logs[_dc2(r["topic"])][r["value"]].append(pos)
                elif op["process"] in group_of:
                    g = group_of[op["process"]]
                    reads[(_base(g), _dc2(g))].add(r["value"])
                    if _dc2(g):
                        key = (_base(g), r["topic"], r["partition"])
                        reach[key] = max(reach.get(key, -1), r["offset"])
    dc1_log = logs[False]
    dc2_log = {val: ps for val, ps in logs[True].items() if val in sent_to_dc1}
    out: dict[str, list[dict[str, Any]]] = {c: [] for c in names("mirror")}
    for val, ps in dc1_log.items():
        if val in dc2_log:
            continue
        if any(o <= copied.get((t, p), -1) for t, p, o in ps):
            out["mirror-lost"].append({"value": val})
    groups = {g for g, _ in reads}
    for val, ps in dc2_log.items():
        for g in groups:
            if val in reads[(g, False)] or val in reads[(g, True)]:
                continue
            if any(o < reach.get((g, t, p), -1) for t, p, o in ps):
                out["failover-skip"].append({"group": g, "value": val})
        if len(set(ps)) > 1:
            out["mirror-duplicate"].append({"value": val})
    for g in groups:
        for val in reads[(g, False)] & reads[(g, True)]:
            out["failover-reread"].append({"group": g, "value": val})
    out["mirror-partition"], out["mirror-order"] = _misplaced(dc1_log, dc2_log)
    return out


def _misplaced(
    dc1_log: dict[int, list[Pos]], dc2_log: dict[int, list[Pos]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(moved to another partition, out of dc1's order within one partition)."""
    by_partition: dict[tuple[str, int], list[tuple[int, int, Pos]]] = defaultdict(list)
    for val, ps in dc1_log.items():
        if val in dc2_log:
            t, p, o = min(ps, key=lambda x: x[2])
            by_partition[(t, p)].append((o, val, min(dc2_log[val], key=lambda x: x[2])))
    moved, behind = [], []
    for (_, p1), rows in by_partition.items():
        rows.sort()
        prev: tuple[int, int] | None = None  # the preceding value's dc2 (partition, offset)
        for _, val, (_, p2, o2) in rows:
            if p2 != p1:
                moved.append({"value": val})
            elif prev is not None and prev[0] == p2 and prev[1] > o2:
                behind.append({"value": val})
            prev = (p2, o2)
    return moved, behind
