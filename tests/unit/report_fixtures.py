"""Build realistic run directories for report tests, by simulation (no pasted blobs).

A small discrete-time simulation of two producers, one assign-mode consumer,
a nemesis (kill n2, then partition n1) and a 3-broker cluster writes
history.jsonl and cluster-state.jsonl following docs/history.md.  results.json
is derived from what the simulation did, so an "invalid" run carries a real
lost write: an acknowledged offset the consumer never returned while its
neighbours were read.
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_chaos.checkers.catalog import names
from kafka_chaos.harness.spec import TestSpec

NS = 1_000_000_000
MS = 1_000_000
XSS = "<script>alert(1)</script>"
TOPIC = "chaos"
PARTITIONS = 3
NODES = ("n1", "n2", "n3")

# a resource reference (src=, href=, url()) to another host, with or without a scheme
EXTERNAL = re.compile(r"""(?:(?:src|href)\s*=\s*|url\()\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


def assert_self_contained(page: str) -> None:
    assert not EXTERNAL.search(page), EXTERNAL.search(page)
    assert "<link" not in page and "@import" not in page


@dataclass
class Sim:
    """What happened, kept to derive results.json the way a checker would."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    acked: dict[tuple[int, int], tuple[int, int, int, int]] = field(default_factory=dict)
    # (partition, offset) -> (value, ack_index, invoke_index, ack_time)
    reads: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    first_read: dict[int, tuple[int, int]] = field(default_factory=dict)  # value -> (t, index)
    lost: tuple[int, int] | None = None

    def emit(self, t: int, process: Any, type_: str, f: str, value: Any) -> int:
        index = len(self.lines)
        self.lines.append(
            {"index": index, "time": t, "process": process, "type": type_, "f": f, "value": value}
        )
        return index


FAULTS = ((1, "kill", ["n2"], 10.0, 18.0), (2, "partition", ["n1"], 22.0, 26.0))


def in_fault(t_s: float) -> bool:
    return any(start <= t_s < end for _, _, _, start, end in FAULTS)


def simulate(seconds: int, lose: bool, xss: bool, seed: int) -> Sim:
    rng = random.Random(seed)
    sim = Sim()
    next_offset = [0] * PARTITIONS
    value_counter = 0
    producers = {0: None, 1: None}  # process -> in-flight (done_t, value, invoke_idx, outcome)
    unread: list[tuple[int, int, int]] = []  # (ack_time, partition, offset)
    fault_names = {1: "kill" + (XSS if xss else ""), 2: "partition"}
    sim.emit(
        0,
        2,
        "invoke",
        "assign",
        {"group": None, "partitions": [[TOPIC, p] for p in range(PARTITIONS)]},
    )
    sim.emit(
        1 * MS,
        2,
        "ok",
        "assign",
        {"group": None, "partitions": [[TOPIC, p] for p in range(PARTITIONS)]},
    )
    step = 10 * MS
    for t in range(2 * MS, seconds * NS, step):
        t_s = t / NS
        for fid, _f, targets, start, end in FAULTS:
            tgt = [x + XSS for x in targets] if xss and fid == 1 else targets
            if start <= t_s < start + step / NS:
                sim.emit(
                    t,
                    "nemesis",
                    "info",
                    fault_names[fid],
                    {"phase": "start", "id": fid, "targets": tgt},
                )
            if end <= t_s < end + step / NS:
                sim.emit(
                    t,
                    "nemesis",
                    "info",
                    fault_names[fid],
                    {"phase": "end", "id": fid, "targets": tgt},
                )
        for proc, flight in producers.items():
            if flight is None:
                value_counter += 1
                value = value_counter
                part = value % PARTITIONS
                inv = {"topic": TOPIC, "key": str(part), "value": value}
                idx = sim.emit(t, proc, "invoke", "send", inv)
                slow = in_fault(t_s)
                lat = rng.randint(150, 900) if slow else rng.randint(2, 25)
                outcome = rng.choices(["ok", "fail", "info"], [70, 15, 15])[0] if slow else "ok"
                producers[proc] = (t + lat * MS, inv, idx, outcome)
            elif flight[0] <= t:
                _, inv, inv_idx, outcome = flight
                if outcome == "ok":
                    part = inv["value"] % PARTITIONS
                    off = next_offset[part]
                    next_offset[part] += 1
                    ack = sim.emit(t, proc, "ok", "send", {**inv, "partition": part, "offset": off})
                    sim.acked[(part, off)] = (inv["value"], ack, inv_idx, t)
                    if lose and sim.lost is None and t_s > seconds * 0.4 and part == 1:
                        sim.lost = (part, off)  # acked, then truncated away: never readable
                    else:
                        unread.append((t, part, off))
                else:
                    err = (
                        "KafkaError{code=_MSG_TIMED_OUT}"
                        if outcome == "info"
                        else "NOT_ENOUGH_REPLICAS" + (XSS if xss else "")
                    )
                    sim.emit(t, proc, outcome, "send", {**inv, "error": err})
                producers[proc] = None
        if (t // step) % 10 == 0:
            poll(sim, t, unread, final=False)
    poll(sim, seconds * NS, unread, final=True)
    return sim


def poll(sim: Sim, t: int, unread: list[tuple[int, int, int]], final: bool) -> None:
    ready = [u for u in unread if final or u[0] < t - 5 * MS][:200]
    for u in ready:
        unread.remove(u)
    inv = {"final": True} if final else None
    sim.emit(t, 2, "invoke", "poll", inv)
    records = []
    for _, part, off in ready:
        value = sim.acked[(part, off)][0]
        records.append(
            {"topic": TOPIC, "partition": part, "offset": off, "key": str(part), "value": value}
        )
        sim.reads.setdefault((part, off), []).append(value)
    done = t + 2 * MS
    idx = sim.emit(done, 2, "ok", "poll", {"records": records, **(inv or {})})
    for r in records:
        sim.first_read.setdefault(r["value"], (done, idx))


def cluster_state(seconds: int) -> list[dict[str, Any]]:
    """Leader/ISR per second: n2 (id 2) loses leadership and ISR while killed."""
    samples = []
    for s in range(seconds + 1):
        down = 10 <= s < 18
        catching_up = 18 <= s < 20
        parts = []
        for p in range(PARTITIONS):
            leader = p + 1
            if leader == 2 and (down or catching_up):
                leader = 3
            isr = [1, 3] if down or catching_up else [1, 2, 3]
            parts.append(
                {
                    "topic": TOPIC,
                    "partition": p,
                    "leader": leader,
                    "replicas": [1, 2, 3],
                    "isr": isr,
                }
            )
        samples.append(
            {"time": s * NS, "controller": 3 if s >= 10 else 2, "partitions": parts, "error": None}
        )
    return samples


def percentiles(vals: list[float]) -> dict[str, float]:
    vals = sorted(vals)

    def q(x: float) -> float:
        return vals[min(len(vals), max(1, math.ceil(x / 100 * len(vals)))) - 1]

    return {
        "p50_ms": q(50),
        "p95_ms": q(95),
        "p99_ms": q(99),
        "max_ms": vals[-1],
        "mean_ms": sum(vals) / len(vals),
    }


def realtime_lag(sim: Sim) -> dict[str, Any]:
    lags = []
    for value, ack_idx, _inv, ack_t in sim.acked.values():
        if value in sim.first_read:
            read_t, read_idx = sim.first_read[value]
            lags.append(((read_t - ack_t) / MS, value, [ack_idx, read_idx]))
    edges = (1, 2, 5, 10, 20, 50, 100, 200)
    hist = [
        {
            "le_ms": e,
            "count": sum(1 for lag, _, _ in lags if (edges[i - 1] if i else -1) < lag <= e),
        }
        for i, e in enumerate(edges)
    ]
    worst = sorted(lags, reverse=True)[:5]
    return {
        "count": len(lags),
        **percentiles([x[0] for x in lags]),
        "histogram": hist,
        "worst": [{"value": v, "lag_ms": lag, "indices": ix} for lag, v, ix in worst],
    }


def lost_write_example(sim: Sim) -> dict[str, Any]:
    part, off = sim.lost  # type: ignore[misc]
    value, ack_idx, inv_idx, _ = sim.acked[(part, off)]
    neighbours = [
        {
            "offset": o,
            "acked_value": sim.acked[(part, o)][0],
            "read_values": sim.reads.get((part, o), []),
        }
        for o in range(off - 3, off + 4)
        if (part, o) in sim.acked
    ]
    return {
        "value": value,
        "topic": TOPIC,
        "partition": part,
        "offset": off,
        "ack_index": ack_idx,
        "invoke_index": inv_idx,
        "neighbours": neighbours,
        "indices": [inv_idx, ack_idx],
    }


def check(count: int, severity: str = "error", examples: list | None = None) -> dict[str, Any]:
    return {
        "valid": count == 0 or severity != "error",
        "count": count,
        "severity": severity,
        "explanation": "",
        "examples": examples or [],
    }


def results_for(sim: Sim, kind: str, xss: bool) -> dict[str, Any]:
    checks = {n: check(0) for n in names("queue")}
    if kind == "invalid":
        checks["lost-write"] = check(1, examples=[lost_write_example(sim)])
        ex = {
            "process": 2,
            "topic": TOPIC,
            "partition": 0,
            "from_offset": 41,
            "to_offset": 38,
            "indices": [120, 180],
        }
        if xss:
            ex[XSS] = XSS
        checks["nonmonotonic-poll"] = check(2, "warning", [ex])
        if xss:
            checks["weird" + XSS] = {**check(1, "info", [{"note": XSS}]), "explanation": XSS}
    if kind == "unknown":
        checks["unseen"] = {**check(3), "valid": "unknown"}  # no final drain: undecided
    acked = len(sim.acked)
    seconds = max(line["time"] for line in sim.lines) / NS
    return {
        "verdict": kind,
        "history": "history.jsonl",
        "ops": len(sim.lines),
        "final_drain": kind != "unknown",
        "checks": checks,
        "stats": {
            "availability": {
                "send_rate": acked / seconds,
                "poll_rate": acked / seconds,
                "longest_gap_s": 1.2,
                "longest_gap_start_s": 10.4,
                "threshold": None,
            },
            "realtime_lag": realtime_lag(sim),
        },
    }


def build_run(
    run_dir: Path,
    kind: str = "invalid",
    *,
    seconds: int = 30,
    xss: bool = False,
    seed: int = 7,
    results: bool = True,
    optional: bool = True,
    results_timeline: bool = False,
    expected: str | None = None,
) -> Sim:
    """Write a run directory; ``optional=False`` omits cluster state, schedule and logs."""
    run_dir.mkdir(parents=True, exist_ok=True)
    sim = simulate(seconds, lose=kind == "invalid", xss=xss, seed=seed)
    with open(run_dir / "history.jsonl", "w") as fh:
        for line in sim.lines:
            fh.write(json.dumps(line) + "\n")
    spec = TestSpec(
        name="lost-ack" + (XSS if xss else ""),
        seed=seed,
        time_limit_s=seconds,
        scenario="unclean-election" + (XSS if xss else ""),
        expected_verdict=expected,
    )
    spec.consumer.mode = "assign"  # the simulated consumer assigns all partitions
    spec.topic.unclean_leader_election = kind == "invalid"
    spec.topic.min_insync_replicas = 1 if kind == "invalid" else 2
    spec.save(
        run_dir / "config.json",
        {
            "versions": {"kafka": "4.4.0", "harness": "0.1.0", "python": "3.11", "java": "17"},
            "started_at": "2026-11-22T10:00:00Z",
        },
    )
    if results:
        res = results_for(sim, kind, xss)
        if results_timeline:
            from kafka_chaos.reports.timeline import summarize_history

            summary = summarize_history(run_dir / "history.jsonl")
            res["stats"]["availability"]["timeline"] = summary.timeline
            res["stats"]["availability"]["faults"] = [
                {**f, "rate_before": 95.0, "rate_during": 40.0} for f in summary.faults
            ]
        (run_dir / "results.json").write_text(json.dumps(res, indent=1))
    if optional:
        with open(run_dir / "cluster-state.jsonl", "w") as fh:
            for sample in cluster_state(seconds):
                fh.write(json.dumps(sample) + "\n")
        ops = [
            {"at_s": start, "f": f, "targets": targets, "duration_s": end - start, "params": {}}
            for _, f, targets, start, end in FAULTS
        ]
        (run_dir / "schedule.json").write_text(json.dumps({"seed": seed, "ops": ops}))
        for node in NODES:
            logs = run_dir / "logs" / node
            logs.mkdir(parents=True, exist_ok=True)
            (logs / "server.log").write_text(f"[{node}] started\n")
        if xss:
            (run_dir / "logs" / "n1" / ("evil" + XSS.replace("/", "_") + ".log")).write_text("x")
    return sim
