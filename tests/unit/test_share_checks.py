"""Property tests of the share-group checks: on generated share-group histories the
reference finds exactly the injected anomaly and nothing in valid ones, and the Spark
checks agree with the reference on every history, judged together in one Spark job."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from kafka_chaos.checkers.share.share_checks import LEADER_CHANGE, judge_share

from testkit.builder import write_histories
from testkit.reference_share import judge_share as reference
from testkit.reference_share import share_stats as reference_stats
from testkit.share_events import share_events
from testkit.synthetic_share import KINDS, generate

SEED = int(os.environ.get("CHECKER_PROPERTY_SEED", "20261125"))
EXAMPLES = int(os.environ.get("SHARE_PROPERTY_EXAMPLES", "25"))
EXPECTED = {
    "valid": {},
    "unknown-drain-incomplete": {},
    "share-lost": {"share-lost": 1},
    "share-double-acquire": {"share-double-acquire": 1},
    "share-redelivered-after-accept": {"share-redelivered-after-accept": 1},
    "share-redelivered-after-reject": {"share-redelivered-after-reject": 1},
    "share-delivery-count": {"share-delivery-count": 1},
    "share-delivery-count-stalled": {"share-delivery-count-stalled": 1},
    # legal look-alikes across a leader change: information, never an error
    LEADER_CHANGE: {LEADER_CHANGE: 3},
    # a release never redelivered is also never accepted
    "share-missing-redelivery": {"share-missing-redelivery": 1, "share-lost": 1},
}
COLLECTED: list[tuple[str, int]] = []  # (kind, seed), in history-id order


def found(ops: list[dict], samples: list[dict] | None = None) -> dict[str, int]:
    judged = reference(share_events(ops), samples)
    return {k: len(v) for k, v in judged.anomalies.items() if v}


@pytest.mark.parametrize("kind", KINDS)
@seed(SEED)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history_seed=st.integers(0, 2**63))
def test_reference_finds_exactly_the_injected_anomaly(kind: str, history_seed: int) -> None:
    b = generate(0, kind, history_seed)
    ops = b.ops
    assert found(ops, b.samples) == EXPECTED[kind]
    judged = reference(share_events(ops))
    assert judged.incomplete_drains == (["g0"] if kind == "unknown-drain-incomplete" else [])
    COLLECTED.append((kind, history_seed))


def test_spark_agrees_with_the_reference_on_every_history(spark, tmp_path) -> None:
    if not COLLECTED:
        pytest.skip("run together with the reference property test")
    built = [generate(hid, kind, s) for hid, (kind, s) in enumerate(COLLECTED)]
    histories = [b.ops for b in built]
    path = write_histories(tmp_path / "share.jsonl", histories)
    with open(tmp_path / "cluster-state.jsonl", "w") as fh:  # every history's, beside it
        fh.writelines(json.dumps(s) + "\n" for b in built for s in b.samples)
    anomalies, tallies, incomplete, stats = judge_share(spark, path, examples=None)
    by_history: dict[int, Counter] = {hid: Counter() for hid in range(len(COLLECTED))}
    for check, (count, examples) in anomalies.items():
        assert count == len(examples)
        for ex in examples:
            by_history[int(ex["group"][1:])][check] += 1
    mismatches = [
        (hid, kind, dict(by_history[hid]), found(b.ops, b.samples))
        for hid, ((kind, _), b) in enumerate(zip(COLLECTED, built, strict=True))
        if dict(by_history[hid]) != found(b.ops, b.samples)
    ]
    assert not mismatches, mismatches[:5]
    # Some acks carried no offset (testkit/synthetic_share.py's ShareHistory.send).
    assert any(op["f"] == "send" and op["type"] == "ok" and op["value"]["offset"] is None
               for ops in histories for op in ops)  # fmt: skip
    # and the allowed redeliveries name the same change for the same pair of deliveries
    spark_changes = sorted(
        (int(ex["group"][1:]), tuple(ex["indices"]), ex["change"])
        for ex in anomalies.get(LEADER_CHANGE, (0, []))[1]
    )
    twin_changes = sorted(
        (hid, tuple(ex["indices"]), ex["change"])
        for hid, b in enumerate(built)
        for ex in reference(share_events(b.ops), b.samples).anomalies[LEADER_CHANGE]
    )
    assert spark_changes == twin_changes
    expected_incomplete = sorted(
        f"g{hid}" for hid, (kind, _) in enumerate(COLLECTED) if kind == "unknown-drain-incomplete"
    )
    assert incomplete == expected_incomplete
    refs = [reference(share_events(ops)) for ops in histories]
    assert tallies.get("undecided", 0) == sum(r.undecided for r in refs) > 0
    assert tallies.get("at-limit", 0) == sum(r.at_limit for r in refs) > 0
    # The statistics too: waits for a first delivery and redelivery after crashes.
    want = reference_stats(share_events(op for ops in histories for op in ops))
    assert _by_process(stats) == _by_process(want)
    assert sum(len(g["crashes"]) for g in want.values()) > 0


def _by_process(stats: dict) -> dict:
    """Crashes at the same moment in a stable order (Spark orders them by time only)."""
    return {
        group: {**g, "crashes": sorted(g["crashes"], key=lambda c: c["process"])}
        for group, g in stats.items()
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind,verdict",
    [("valid", "valid"), ("unknown-drain-incomplete", "unknown"), ("share-lost", "invalid"),
     ("share-double-acquire", "invalid")],
)  # fmt: skip
def test_a_share_run_is_judged_by_its_share_checks(spark, tmp_path, kind, verdict) -> None:
    from kafka_chaos.checkers.api import check_history

    from kafka_chaos.options import build_spec

    history = generate(0, kind, 7).write(tmp_path / "history.jsonl")
    config = build_spec({"consumer": {"mode": "share"}}).to_dict()
    results = check_history(history, config)
    checks = results["checks"]
    assert results["verdict"] == verdict, results["unknown_reasons"]
    assert {n for n, c in checks.items() if c["count"]} == set(EXPECTED[kind])
    if kind == "unknown-drain-incomplete":
        assert checks["share-lost"]["valid"] == "unknown"
        assert "share drain of g0 did not complete" in results["unknown_reasons"][0]
    if kind == "valid":
        assert checks["acked-lost"]["valid"] is True and checks["share-lost"]["valid"] is True
        stats = results["stats"]["share"]["g0"]
        assert stats["wait_for_first_delivery"]["records"] > 0
        assert (
            stats["wait_for_first_delivery"]["max_ms"] >= stats["wait_for_first_delivery"]["p50_ms"]
        )


def test_crash_statistics_count_held_records_that_never_came_back(spark, tmp_path) -> None:
    """A crashed member held two records (a third it had accepted): one came back
    15 s later, one never did. Both count as held, one as delivered again."""
    import random

    from testkit.builder import HistoryBuilder
    from testkit.synthetic_share import LOCK_MS, Namespace, ShareHistory, final_drain

    b = HistoryBuilder(step_ms=5)
    h = ShareHistory(b, Namespace(0), random.Random(0), limit=5)
    p, q = h.member(), h.member()
    back, never, accepted = h.send(1), h.send(2), h.send(3)
    h.deliver(p, [(back, 1), (never, 1), (accepted, 1)])
    h.ack(p, [(accepted, "accept")])
    h.deliver(p, [(back, 1)])  # handed out again to the same member: still one held record
    h.crash(p)
    b.advance(LOCK_MS / 1000)
    h.deliver(q, [(back, 2)])
    h.ack(q, [(back, "accept")])
    final_drain(h)
    drained = {"group": "g0", "final": True, "complete": True, "quiet_s": 18, "delivered": 0}
    b.op(h.ns.process(999), "ok", "share-drain", drained)
    path = write_histories(tmp_path / "share.jsonl", [b.ops])
    *_, stats = judge_share(spark, path, examples=None)
    [crash] = stats["g0"]["crashes"]
    assert crash["process"] == str(p)  # process ids are strings in the share tables
    assert (crash["held"], crash["delivered_again"]) == (2, 1)
    assert LOCK_MS <= crash["redelivered_within_ms"] < LOCK_MS + 1000


def _unplaced(ops: list[dict], deliveries: bool) -> tuple[list[dict], int]:
    """``ops`` with one acknowledged send's offset null, as the recorder writes a batch
    answered DUPLICATE_SEQUENCE_NUMBER (workloads/delivery_offsets.py); with
    ``deliveries`` False its value is also never delivered nor acked.  (ops, value)."""
    accepted = {
        (a["topic"], a["partition"], a["offset"])
        for op in ops if op["f"] == "share-ack" and op["type"] == "ok"
        for a in op["value"]["acks"] if a["type"] == "accept"
    }  # fmt: skip
    send = next(
        op for op in ops
        if op["f"] == "send" and op["type"] == "ok"
        and (op["value"]["topic"], op["value"]["partition"], op["value"]["offset"]) in accepted
    )  # fmt: skip
    value = send["value"]["value"]
    out = []
    for op in ops:
        if op is send:
            op = {**op, "value": {**op["value"], "offset": None}}
        elif not deliveries and op["f"] in ("share-poll", "share-ack") and op["type"] != "invoke":
            key = "records" if op["f"] == "share-poll" else "acks"
            kept = [r for r in op["value"].get(key, []) if r.get("value") != value]
            op = {**op, "value": {**op["value"], key: kept}}
        out.append(op)
    return out, value


@pytest.mark.parametrize("delivered", [True, False])
def test_a_send_acked_without_an_offset_is_placed_by_its_value(spark, tmp_path, delivered):
    """The CI run of eeaca28 called two values share-lost that were stored, delivered and
    accepted: their sends were acked without an offset, and the check matched by offset."""
    ops, value = _unplaced(generate(0, "valid", 7).ops, deliveries=delivered)
    path = write_histories(tmp_path / "share.jsonl", [ops])
    anomalies, _, _, _ = judge_share(spark, path, examples=None)
    lost = anomalies.get("share-lost", (0, []))
    if delivered:
        assert lost[0] == 0, lost
    else:
        assert lost[0] == 1 and lost[1][0]["value"] == value, lost
