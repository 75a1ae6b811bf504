"""Property tests: the Spark statistics (availability, realtime lag) equal the
pure-Python reference (``testkit/reference_stats.py``) on generated histories.

Histories mix acked, failed and indeterminate sends with latencies that
differ, polls that re-read, pauses that leave whole seconds without acks (or
none at all, so that equally long gaps tie), faults (some never healed) and
sometimes a final drain.  Fault lines carry planned and realised times
(``planned_s``, ``at_s``) on plan, just inside or past the tolerance, far
off, or not at all.  Times are whole milliseconds, so every figure is
exact in floating point and the two must agree to the last digit.  As in
``test_checker_properties``, hypothesis only generates (fast); the histories
are then judged together in one Spark run, one history id each.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from testkit import reference_stats
from testkit.builder import HistoryBuilder, write_histories

SEED = int(os.environ.get("CHECKER_PROPERTY_SEED", "20261122"))
EXAMPLES = int(os.environ.get("STATISTICS_PROPERTY_EXAMPLES", "150"))
THRESHOLD = 50.0
MS = 10**6  # every time is a whole number of milliseconds
PARTITIONS = 3
CONSUMERS = (10, 11)


def generate(rnd: random.Random) -> list[dict[str, Any]]:
    """One history of ``rnd``'s choosing (see the module docstring)."""
    b = HistoryBuilder(step_ms=rnd.choice([1.0, 7.0, 40.0, 130.0]))
    logs: list[list[int]] = [[] for _ in range(PARTITIONS)]
    value, fault, open_fault = 0, 0, False
    pauses = rnd.choice([0.0, 0.05, 0.1])  # none: equally long gaps, where the earliest must win
    for _ in range(rnd.randint(0, 80)):
        roll = rnd.random()
        if roll < pauses:
            b.time_ns += rnd.choice([250, 1000, 2500, 7000]) * MS
        elif roll < pauses + 0.08:
            if not open_fault:
                fault += 1
            phase = "end" if open_fault else "start"
            planned = fault * 10.0 + (8.0 if open_fault else 0.0)
            b.fault("kill", fault, phase, [f"n{rnd.randint(1, 3)}"], **plan(rnd, planned))
            open_fault = not open_fault
        elif roll < 0.65:
            value += 1
            pid, p = rnd.choice((1, 2)), rnd.randrange(PARTITIONS)
            outcome = rnd.choice(("ok", "ok", "ok", "fail", "info"))
            b.invoke_send(pid, value)
            b.time_ns += rnd.choice([0, 0, 2, 13, 250]) * MS  # latencies that differ
            if outcome == "ok" or (outcome == "info" and rnd.random() < 0.5):
                logs[p].append(value)
            if outcome == "ok":
                b.complete_send(pid, value, "ok", "t", p, len(logs[p]) - 1)
            else:
                b.complete_send(pid, value, outcome)
        else:
            p = rnd.randrange(PARTITIONS)
            start = rnd.randint(0, len(logs[p]))
            end = rnd.randint(start, len(logs[p]))
            b.poll(rnd.choice(CONSUMERS), [("t", p, o, logs[p][o]) for o in range(start, end)])
    if rnd.random() < 0.5:
        for p in range(PARTITIONS):
            b.poll(99, [("t", p, o, v) for o, v in enumerate(logs[p])], final=True)
    return b.ops


def plan(rnd: random.Random, planned: float) -> dict[str, float]:
    """A fault line's planned and realised time: on plan, off by up to or just past
    the 1 s tolerance either way, far off, or missing (older histories)."""
    roll = rnd.random()
    if roll < 0.2:
        return {}
    if roll < 0.25:
        return {"planned_s": planned}
    miss = rnd.choice([0.0, 0.0, 0.25, -0.5, 1.0, -1.0, 1.001, -1.001, 2.5, 30.0])
    return {"planned_s": planned, "at_s": round(planned + miss, 3)}


HISTORIES: list[list[dict[str, Any]]] = []


@seed(SEED)
@settings(max_examples=EXAMPLES, deadline=None, print_blob=True)
@given(history_seed=st.integers(0, 2**63))
def test_reference_statistics_are_consistent(history_seed: int) -> None:
    """Cheap invariants of the reference, and collect the history for the Spark test."""
    ops = generate(random.Random(history_seed))
    avail = reference_stats.availability(ops, THRESHOLD)
    lag = reference_stats.realtime_lag(ops)
    acks = [op for op in ops if op["f"] == "send" and op["type"] == "ok"]
    assert sum(r["acked"] for r in avail["timeline"]) == len(acks)
    assert sum(h["count"] for h in lag["histogram"]) == lag["count"] <= len(acks)
    assert [w["lag_ms"] for w in lag["worst"]] == sorted(
        (w["lag_ms"] for w in lag["worst"]), reverse=True
    )
    assert 0 <= avail["longest_gap_start_s"] <= max((op["time"] for op in ops), default=0) / 1e9
    HISTORIES.append(ops)


def crowded_lags() -> list[dict[str, Any]]:
    """Lags the generator never makes: reads before their ack (negative), at the
    same moment (zero), and many distinct or equal lags inside one fine bucket,
    where the percentiles must be counted lag by lag."""
    b = HistoryBuilder(step_ms=0)
    b.invoke_send(1, 0)
    b.poll(10, [("t", 0, 0, 0)])  # read before its ack: a negative lag
    b.advance(0.003)
    b.complete_send(1, 0, partition=0, offset=0)
    b.send(1, 1, partition=0, offset=1)
    b.poll(10, [("t", 0, 1, 1)])  # zero lag
    offset = 2
    for extra_ns in [0, 1, 2, 2, 3, 5, 8, 8, 8, 13] * 3:  # one fine bucket of 1 s lags
        b.send(1, offset, partition=0, offset=offset)
        b.advance(1 + extra_ns / 1e9)
        b.poll(10, [("t", 0, offset, offset)])
        offset += 1
    return b.ops


@pytest.fixture(scope="module")
def judged(spark, tmp_path_factory) -> tuple[list[list[dict[str, Any]]], dict[int, dict]]:
    """The generated histories (those the property test collected), then
    ``crowded_lags()`` last, judged in one Spark run: (the histories, results by id).
    One job instead of one for each test: Spark's fixed cost per job is most of a
    small check's time."""
    from kafka_chaos.checkers.api import analyse
    from kafka_chaos.checkers.ingest.load import load_history

    histories = HISTORIES or [generate(random.Random(SEED + i)) for i in range(EXAMPLES)]
    path = write_histories(tmp_path_factory.mktemp("stats") / "many.jsonl",
                           [*histories, crowded_lags()])  # fmt: skip
    config = {"checker": {"availability_min_rate": THRESHOLD}}
    return histories, analyse(spark, load_history(spark, path), config, examples=None)


def test_spark_statistics_equal_the_reference(judged, record_property) -> None:
    histories, results = judged
    results = {hid: results[hid] for hid in range(len(histories))}  # the generated ones
    record_property(
        "logged",
        f"seed={SEED} (CHECKER_PROPERTY_SEED); histories judged in one Spark run: "
        f"{len(histories)} (STATISTICS_PROPERTY_EXAMPLES={EXAMPLES})",
    )
    mismatches = []
    for hid, ops in enumerate(histories):
        if not ops:
            continue
        want = {
            "availability": reference_stats.availability(ops, THRESHOLD),
            "realtime_lag": reference_stats.realtime_lag(ops),
        }
        got = results[hid]["stats"]
        for part in want:
            for key in want[part]:
                if got[part][key] != want[part][key]:
                    mismatches.append((hid, part, key, got[part][key], want[part][key]))
        plan_want = reference_stats.faults_off_plan(ops)
        if results[hid]["faults_off_plan"] != plan_want:
            mismatches.append((hid, "faults_off_plan", results[hid]["faults_off_plan"], plan_want))
        rates = [f["rate_during"] for f in want["availability"]["faults"]]
        slow = [r for r in rates if r is not None and r < THRESHOLD]
        if results[hid]["checks"]["availability"]["count"] != len(slow):
            mismatches.append((hid, "availability check", len(slow)))
    assert not mismatches, mismatches[:5]
    faults = sum(len(results[h]["stats"]["availability"]["faults"]) for h in results)
    gaps = sum(results[h]["stats"]["availability"]["longest_gap_s"] >= 1 for h in results)
    assert faults and gaps, "the generator stopped making faults or long gaps"
    plans = [results[h]["faults_off_plan"] for h in results]
    late = [f for p in plans for f in p["faults"] if f["healed"]]
    assert late and any(not f["healed"] for p in plans for f in p["faults"]), "no fault off plan"
    every = [f for h in results for f in results[h]["stats"]["availability"]["faults"]]
    edge = [f for f in every if f["deviation_s"] == 1.0 and f["healed"]]
    assert edge and not any(f["off_plan"] for f in edge), "no fault exactly at the tolerance"


def test_lag_percentiles_are_exact_for_negative_zero_and_crowded_lags(judged) -> None:
    """(crowded_lags says which lags.)"""
    histories, results = judged
    got = results[len(histories)]["stats"]
    ops = crowded_lags()
    want = reference_stats.realtime_lag(ops)
    assert got["realtime_lag"] == want
    assert want["count"] == 32 and want["p50_ms"] == 1_000_000_003 / 1e6  # rank 16 of 32
