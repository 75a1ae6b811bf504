"""Share-partition tenures: when a leader change may lie between two deliveries, and
what the share checks make of the redeliveries KIP-932 allows after one.

Hand-made cases beside the property tests (test_share_checks.py): the rules of
checkers/share_tenures.py on samples and fault lines, and the two evidence shapes
(a record handed to another member, or to the same one, with its count unchanged
after its leader was killed) judged by the Spark checks and the twin alike.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from checkers import share_tenures as st
from checkers.builder import write_histories
from checkers.share_checks import LEADER_CHANGE, judge_share
from checkers.share_events import share_events
from testkit.reference_share import judge_share as reference
from testkit.synthetic_share import Namespace, ShareBuilder, ShareHistory, final_drain

S = 1_000_000_000
DRAINED = {"group": "g0", "final": True, "complete": True, "quiet_s": 18, "delivered": 0}


def sample(t_s: float, leaders: dict[int, int | None], error: bool = False) -> dict:
    parts = [{"topic": "t0", "partition": p, "leader": n, "replicas": [], "isr": []}
             for p, n in leaders.items()]  # fmt: skip
    if error:
        return {"time": int(t_s * S), "controller": None, "partitions": [], "error": "timeout"}
    return {"time": int(t_s * S), "controller": 1, "partitions": parts, "error": None}


def fault(f: str, fid: int, start_s: float, end_s: float | None, targets: list[str]) -> list:
    lines = [{"hid": 0, "f": f, "time": int(start_s * S),
              "value": {"phase": "start", "id": fid, "targets": targets}}]  # fmt: skip
    if end_s is not None:
        lines.append({"hid": 0, "f": f, "time": int(end_s * S),
                      "value": {"phase": "end", "id": fid, "targets": targets}})  # fmt: skip
    return lines


def bounds_for(samples: list, lines: list, partition: int) -> list[st.Boundary]:
    found, _ = st.boundaries(samples, st.faults_from_lines(lines))
    edges = ("not sampled before", "not sampled after")
    return [b for b in found if b.partition == partition and not any(e in b.why for e in edges)]


def test_a_sampled_leader_move_may_lie_anywhere_from_the_sample_before_to_the_one_after() -> None:
    samples = [sample(t, {0: 1 if t < 3 else 2, 1: 3}) for t in range(6)]
    [moved] = bounds_for(samples, [], 0)
    assert (moved.start, moved.end) == (2 * S, 4 * S)
    assert moved.why == "leader of t0/0 moved n1 -> n2 between 2.0 s and 3.0 s"
    assert bounds_for(samples, [], 1) == []  # partition 1 kept its leader throughout


def test_no_leader_a_failed_sample_and_a_gap_are_possible_changes() -> None:
    samples = [sample(0, {0: 1}), sample(1, {0: None}), sample(2, {0: 1}, error=True),
               sample(3, {0: 1}), sample(7, {0: 1}), sample(8, {0: 1})]  # fmt: skip
    whys = [b.why for b in bounds_for(samples, [], 0)]
    assert whys == [
        "leader of t0/0 moved n1 -> no leader between 0.0 s and 1.0 s",
        "leader of t0/0 moved no leader -> unknown between 1.0 s and 2.0 s",
        "leader of t0/0 moved unknown -> n1 between 2.0 s and 3.0 s",
        "leadership of t0/0 not sampled between 3.0 s and 7.0 s",
    ]


def test_a_kill_is_a_boundary_of_the_partitions_its_node_may_have_led_only() -> None:
    samples = [sample(t, {0: 2, 1: 3}) for t in range(10)]
    lines = fault("kill", 0, 4.2, 6.0, ["n2"])
    [killed] = bounds_for(samples, lines, 0)
    assert (killed.start, killed.end, killed.hid) == (int(4.2 * S), 6 * S, 0)
    assert killed.why == "n2, its leader, was killed at 4.2 s"
    assert bounds_for(samples, lines, 1) == []  # n3 led partition 1: n2's death excuses nothing
    # a pause keeps the broker's memory: only the samples could show a move
    assert bounds_for(samples, fault("pause", 1, 4.2, 6.0, ["n2"]), 0) == []


def test_without_samples_every_broker_fault_may_have_moved_leadership() -> None:
    found, sampled = st.boundaries([], st.faults_from_lines(
        fault("pause", 0, 4.0, 6.0, ["n2"]) + fault("mirror-kill", 1, 7.0, 8.0, ["mm"])
        + fault("kill", 2, 9.0, None, ["n3"])))  # fmt: skip
    assert sampled == set()
    assert [(b.topic, b.start, b.end) for b in found] == [
        (None, 4 * S, 6 * S + st.SETTLE_NS),  # leadership may move back after the heal
        (None, 9 * S, st.FOREVER),  # never healed
    ]
    assert found[0].why == "pause of n2 at 4.0 s (leadership of this partition was not recorded)"


def _evidence_shape(same_member: bool, kill: bool) -> tuple[ShareBuilder, dict]:
    """The shape of evidence/share-*-after-leader-kill-4.4.0: member p gets a record
    with count 1 and crashes (or its ack fails), the record's leader n2 is killed,
    the samples show n3 leading 9 s later, and a member gets the record again with
    count 1 and accepts it."""
    b = ShareBuilder(step_ms=5)
    h = ShareHistory(b, Namespace(0), random.Random(0), limit=5)
    p, q = h.member(), h.member()
    b.advance(20)
    r = h.send(1)
    h.deliver(p, [(r, 1)])
    if same_member:
        h.ack(p, [(r, "accept")], "failed-partition")  # _TRANSPORT: outcome unknown
    else:
        h.crash(p)
    b.advance(2.5)
    killed_at = b.time_ns
    if kill:
        b.fault("kill", 0, "start", ["n2"])
    b.advance(12)  # with what follows, past the first hold's 15 s lock: no re-presentation
    if kill:
        b.fault("kill", 0, "end", ["n2"])
    moved_at = b.time_ns + 1.5 * S
    b.advance(3.5)
    h.deliver(p if same_member else q, [(r, 1)])
    h.ack(p if same_member else q, [(r, "accept")])
    b.advance(20)
    final_drain(h)
    b.op(h.ns.process(999), "ok", "share-drain", DRAINED)
    end = b.time_ns + 3 * S
    for t in range(0, end, S):
        leader = 3 if kill and t >= moved_at else 2
        b.samples.append({"time": t, "controller": 1, "error": None, "partitions": [
            {"topic": "t0", "partition": r["partition"], "leader": leader}]})  # fmt: skip
    return b, {"killed_at": killed_at, "partition": r["partition"]}


def _judge(spark, tmp_path: Path, b: ShareBuilder, samples: bool) -> tuple[dict, dict]:
    """(Spark's {check: examples}, the twin's), the samples beside the history or not."""
    path = write_histories(tmp_path / "history.jsonl", [b.ops])
    state = tmp_path / "cluster-state.jsonl"
    state.unlink(missing_ok=True)
    if samples:
        state.write_text("".join(json.dumps(s) + "\n" for s in b.samples))
    judged, *_ = judge_share(spark, path, examples=None)
    twin = reference(share_events(b.ops), b.samples if samples else None).anomalies
    return {k: v[1] for k, v in judged.items() if v[0]}, {k: v for k, v in twin.items() if v}


@pytest.mark.parametrize("same_member", [False, True])
def test_the_evidence_shapes_are_allowed_after_the_leader_kill(spark, tmp_path, same_member):
    b, at = _evidence_shape(same_member, kill=True)
    spark_found, twin_found = _judge(spark, tmp_path, b, samples=True)
    assert set(spark_found) == set(twin_found) == {LEADER_CHANGE}
    [ex] = spark_found[LEADER_CHANGE]
    who = "same member" if same_member else "another member"
    assert ex["how"] == twin_found[LEADER_CHANGE][0]["how"] == f"same delivery count, {who}"
    killed = f"n2, its leader, was killed at {at['killed_at'] / S:.1f} s"
    assert ex["change"] == twin_found[LEADER_CHANGE][0]["change"] == killed
    # a bare history: the kill line alone, and the finding says leadership was not recorded
    spark_found, twin_found = _judge(spark, tmp_path, b, samples=False)
    [ex] = spark_found[LEADER_CHANGE]
    assert ex["change"] == twin_found[LEADER_CHANGE][0]["change"]
    assert ex["change"].startswith("kill of n2 at ") and ex["change"].endswith("not recorded)")


@pytest.mark.parametrize("same_member", [False, True])
def test_the_same_shapes_within_one_tenure_are_errors(spark, tmp_path, same_member):
    b, _ = _evidence_shape(same_member, kill=False)
    spark_found, twin_found = _judge(spark, tmp_path, b, samples=True)
    check = "share-delivery-count-stalled" if same_member else "share-double-acquire"
    assert set(spark_found) == set(twin_found) == {check}


def test_an_old_holders_ack_applied_after_a_new_leader_redelivered_is_still_an_error(
    spark, tmp_path
) -> None:
    """A new leader accepts acks only from the record's holder and fences the old
    leader's writes, so p's release committing after q got the record breaks the lock
    whatever the leader did."""
    b = ShareBuilder(step_ms=5)
    h = ShareHistory(b, Namespace(0), random.Random(0), limit=5)
    p, q = h.member(), h.member()
    b.advance(5)
    r = h.send(1)
    h.deliver(p, [(r, 1)])
    b.fault("kill", 0, "start", ["n2"])
    b.advance(4)
    b.fault("kill", 0, "end", ["n2"])
    h.deliver(q, [(r, 2)])
    h.ack(p, [(r, "release")])
    h.ack(q, [(r, "accept")])
    final_drain(h)
    b.op(h.ns.process(999), "ok", "share-drain", DRAINED)
    spark_found, twin_found = _judge(spark, tmp_path, b, samples=False)
    assert set(spark_found) == set(twin_found) == {"share-double-acquire"}
    assert spark_found["share-double-acquire"][0]["how"] == "ack applied after redelivery"
