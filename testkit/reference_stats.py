"""Pure-Python reference for the statistics (availability and realtime lag).

Like ``testkit/reference.py`` for the anomalies, it states the definitions
as plainly as possible so property tests can demand that the Spark figures
equal them exactly.  Percentiles are the element of rank ceil(q * n), as
Spark computes them (checkers/availability/statistics.py, checkers/availability/lag.py).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from kafka_chaos.checkers.availability.lag import BUCKETS_MS, WORST

NS = 10**9


def rank_percentile(values: list[float], q: float) -> float | None:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1] if ordered else None


def _per_value(ops: list[dict[str, Any]]) -> dict[int, dict[str, int]]:
    """value -> the time of its invoke, ack and first read (each the earliest line)."""
    seen: dict[int, dict[str, int]] = defaultdict(dict)
    for op in ops:
        if op["f"] == "send" and op["type"] in ("invoke", "ok"):
            what = "invoke" if op["type"] == "invoke" else "ack"
            seen[op["value"]["value"]].setdefault(what, op["time"])
        elif op["f"] == "poll" and op["type"] == "ok":
            for r in op["value"]["records"]:
                if r["value"] is not None:
                    seen[r["value"]].setdefault("read", op["time"])
    return seen


def _timeline(ops: list[dict[str, Any]], values: dict[int, dict[str, int]]) -> list[dict]:
    counts: dict[int, dict[str, int]] = defaultdict(
        lambda: {"acked": 0, "failed": 0, "info": 0, "polled": 0}
    )
    for op in ops:
        second = op["time"] // NS
        if op["f"] == "send" and op["type"] != "invoke":
            counts[second][{"ok": "acked", "fail": "failed", "info": "info"}[op["type"]]] += 1
        elif op["f"] == "poll" and op["type"] == "ok" and op["value"]["records"]:
            counts[second]["polled"] += len(op["value"]["records"])
    latencies: dict[int, list[float]] = defaultdict(list)
    for v in values.values():
        if "ack" in v and "invoke" in v:
            latencies[v["ack"] // NS].append((v["ack"] - v["invoke"]) / 1e6)
    rows = []
    for second in sorted(counts.keys() | latencies.keys()):
        c = counts.get(second, {"acked": 0, "failed": 0, "info": 0, "polled": 0})
        lat = latencies.get(second, [])
        rows.append(
            {
                "t": second,
                **c,
                "lat_p50_ms": rank_percentile(lat, 0.5),
                "lat_p99_ms": rank_percentile(lat, 0.99),
                "lat_max_ms": max(lat) if lat else None,
            }
        )
    return rows


def _longest_gap(acks: list[int], end: int) -> tuple[float, float]:
    """Longest stretch of [0, end] with no ack (the earliest of equals)."""
    best, previous = (0, 0), 0
    for time in sorted(acks):
        if time - previous > best[0]:
            best = (time - previous, previous)
        previous = time
    if end - previous > best[0]:
        best = (end - previous, previous)
    return round(best[0] / NS, 3), round(best[1] / NS, 3)


def _faults(ops: list[dict[str, Any]], end: int, acks: list[int]) -> list[dict[str, Any]]:
    lines: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for op in ops:
        if op["process"] == "nemesis" and isinstance(op["value"], dict) and "id" in op["value"]:
            lines[op["value"]["id"]].append(op)
    found = []
    for fault_id, fl in lines.items():
        values = [op["value"] for op in fl]
        starts = [op["time"] for op in fl if op["value"].get("phase") == "start"]
        ends = [op["time"] for op in fl if op["value"].get("phase") == "end"]
        start = min(starts) if starts else 0
        stop = max(ends) if ends else end
        span = (stop - start) / NS
        before_span = min(span, start / NS)
        during = sum(start <= a < stop for a in acks)
        before = sum(start - (stop - start) <= a < start for a in acks)
        found.append(
            {
                "id": fault_id,
                "f": fl[0]["f"],
                "targets": next((v["targets"] for v in values if "targets" in v), []),
                "indices": sorted(op["index"] for op in fl),
                "rate_during": round(during / span, 3) if span > 0 else None,
                "rate_before": round(before / before_span, 3) if before_span > 0 else None,
                "start_s": round(start / NS, 3),
                "end_s": round(stop / NS, 3),
                **_plan(values),
                "_order": (start, fault_id),
            }
        )
    found.sort(key=lambda f: f.pop("_order"))
    return found


def _seconds(value: dict[str, Any], key: str) -> float | None:
    x = value.get(key)
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _plan(values: list[dict[str, Any]]) -> dict[str, Any]:
    """Planned against realised start and end (schedule seconds), stated plainly."""
    start = next((v for v in values if v.get("phase") == "start"), {})
    end = next((v for v in values if v.get("phase") == "end"), None)
    edges = {
        "planned_start_s": _seconds(start, "planned_s"),
        "realised_start_s": _seconds(start, "at_s"),
        "planned_end_s": _seconds(end or {}, "planned_s"),
        "realised_end_s": _seconds(end or {}, "at_s"),
    }
    misses = [
        abs(edges[f"realised_{edge}_s"] - edges[f"planned_{edge}_s"])
        for edge in ("start", "end")
        if edges[f"planned_{edge}_s"] is not None and edges[f"realised_{edge}_s"] is not None
    ]
    deviation = round(max(misses), 3) if misses else None
    return {
        **edges,
        "deviation_s": deviation,
        "healed": end is not None,
        "off_plan": end is None or (deviation is not None and deviation > 1.0),
    }


def faults_off_plan(ops: list[dict[str, Any]]) -> dict[str, Any]:
    """results.json's ``faults_off_plan``: the faults more than 1 s off their plan,
    or never healed, and the worst deviation of any fault."""
    end = max((op["time"] for op in ops), default=0)
    faults = _faults(ops, end, [])
    keep = (
        "id", "f", "targets", "planned_start_s", "realised_start_s", "planned_end_s",
        "realised_end_s", "deviation_s", "healed", "indices",
    )  # fmt: skip
    devs = [f["deviation_s"] for f in faults if f["deviation_s"] is not None]
    late = [{k: f[k] for k in keep} for f in faults if f["off_plan"]]
    return {
        "tolerance_s": 1.0,
        "count": len(late),
        "worst_deviation_s": max(devs) if devs else None,
        "faults": late,
    }


def availability(ops: list[dict[str, Any]], threshold: float | None = None) -> dict[str, Any]:
    values = _per_value(ops)
    end = max((op["time"] for op in ops), default=0)
    drain = [op["time"] for op in ops if _is_final(op)]
    workload_end = min(drain) if drain else end
    line = _timeline(ops, values)
    acks = [v["ack"] for v in values.values() if "ack" in v]
    gap, gap_start = _longest_gap(acks, workload_end)
    duration = max(end / NS, 1e-9)
    return {
        "send_rate": round(sum(r["acked"] for r in line) / duration, 3),
        "poll_rate": round(sum(r["polled"] for r in line) / duration, 3),
        "longest_gap_s": gap,
        "longest_gap_start_s": gap_start,
        "timeline": line,
        "faults": _faults(ops, end, acks),
        "threshold": threshold,
    }


def _is_final(op: dict[str, Any]) -> bool:
    return op["f"] == "poll" and isinstance(op["value"], dict) and bool(op["value"].get("final"))


def realtime_lag(ops: list[dict[str, Any]]) -> dict[str, Any]:
    index_of = _first_indices(ops)
    lags = sorted(
        (-(v["read"] - v["ack"]) / 1e6, value)
        for value, v in _per_value(ops).items()
        if "ack" in v and "read" in v
    )
    ms = [-neg for neg, _ in lags]
    histogram = [0] * (len(BUCKETS_MS) + 1)
    for lag in ms:
        histogram[next((i for i, e in enumerate(BUCKETS_MS) if lag <= e), len(BUCKETS_MS))] += 1
    return {
        "count": len(ms),
        "p50_ms": rank_percentile(ms, 0.5),
        "p95_ms": rank_percentile(ms, 0.95),
        "p99_ms": rank_percentile(ms, 0.99),
        "max_ms": max(ms) if ms else None,
        "mean_ms": round(sum(ms) / len(ms), 3) if ms else None,
        "histogram": [
            {"le_ms": edge, "count": n}
            for edge, n in zip((*BUCKETS_MS, None), histogram, strict=True)
        ],
        "worst": [
            {"value": value, "lag_ms": -neg, "indices": list(index_of[value])}
            for neg, value in lags[:WORST]
        ],
    }


def _first_indices(ops: list[dict[str, Any]]) -> dict[int, tuple[int, int]]:
    """value -> (index of its ack, index of the first poll line that read it)."""
    ack: dict[int, int] = {}
    read: dict[int, int] = {}
    for op in ops:
        if op["f"] == "send" and op["type"] == "ok":
            ack.setdefault(op["value"]["value"], op["index"])
        elif op["f"] == "poll" and op["type"] == "ok":
            for r in op["value"]["records"]:
                read.setdefault(r["value"], op["index"])
    return {v: (ack[v], read[v]) for v in ack.keys() & read.keys()}
