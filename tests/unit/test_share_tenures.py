"""Share-partition tenures: when a leader change may lie between two deliveries, and
what the share checks make of the redeliveries KIP-932 allows after one.

Hand-made cases beside the property tests (test_share_checks.py): the rules of
checkers/share/share_tenures.py on samples and fault lines, and the two evidence shapes
(a record handed to another member, or to the same one, with its count unchanged
after its leader was killed) judged by the Spark checks and the twin alike.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from kafka_chaos.checkers.share import share_tenures as st
from kafka_chaos.checkers.share.share_checks import LEADER_CHANGE, judge_share

from testkit.builder import write_histories
from testkit.reference_share import judge_share as reference
from testkit.share_events import share_events
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


def _evidence_shape(same_member: bool, kill: bool, hid: int = 0) -> tuple[ShareBuilder, dict]:
    """The shape of evidence/share-*-after-leader-kill-4.4.0: member p gets a record
    with count 1 and crashes (or its ack fails), the record's leader (node 2 of history
    ``hid``'s own) is killed, the samples show node 3 leading 9 s later, and a member
    gets the record again with count 1 and accepts it."""
    b = ShareBuilder(step_ms=5)
    h = ShareHistory(b, Namespace(hid), random.Random(0), limit=5)
    killed_node = f"n{h.ns.node(2)}"
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
        b.fault("kill", 0, "start", [killed_node])
    b.advance(12)  # with what follows, past the first hold's 15 s lock: no re-presentation
    if kill:
        b.fault("kill", 0, "end", [killed_node])
    moved_at = b.time_ns + 1.5 * S
    b.advance(3.5)
    h.deliver(p if same_member else q, [(r, 1)])
    h.ack(p if same_member else q, [(r, "accept")])
    b.advance(20)
    final_drain(h)
    b.op(h.ns.process(999), "ok", "share-drain", {**DRAINED, "group": h.ns.group})
    end = b.time_ns + 3 * S
    for t in range(0, end, S):
        leader = h.ns.node(3 if kill and t >= moved_at else 2)
        b.samples.append({"time": t, "controller": 1, "error": None, "partitions": [
            {"topic": r["topic"], "partition": r["partition"], "leader": leader}]})  # fmt: skip
    return b, {"killed_at": killed_at, "partition": r["partition"], "node": killed_node}


def _old_holders_ack(hid: int) -> ShareBuilder:
    """A new leader accepts acks only from the record's holder and fences the old
    leader's writes, so p's release committing after q got the record breaks the lock
    whatever the leader did."""
    b = ShareBuilder(step_ms=5)
    h = ShareHistory(b, Namespace(hid), random.Random(0), limit=5)
    p, q = h.member(), h.member()
    b.advance(5)
    r = h.send(1)
    h.deliver(p, [(r, 1)])
    b.fault("kill", 0, "start", [f"n{h.ns.node(2)}"])
    b.advance(4)
    b.fault("kill", 0, "end", [f"n{h.ns.node(2)}"])
    h.deliver(q, [(r, 2)])
    h.ack(p, [(r, "release")])
    h.ack(q, [(r, "accept")])
    final_drain(h)
    b.op(h.ns.process(999), "ok", "share-drain", {**DRAINED, "group": h.ns.group})
    return b


def _judge(spark, tmp_path: Path, builders: list[ShareBuilder], samples: bool) -> list[tuple]:
    """Each history's (Spark's {check: examples}, the twin's), the samples beside the
    histories or not: all of them in one Spark job (history n is namespace n's, with
    brokers of its own), as the property tests judge theirs, instead of a job each."""
    path = write_histories(tmp_path / "history.jsonl", [b.ops for b in builders])
    if samples:
        (tmp_path / "cluster-state.jsonl").write_text(
            "".join(json.dumps(s) + "\n" for b in builders for s in b.samples)
        )
    judged, *_ = judge_share(spark, path, examples=None)
    spark_found: list[dict] = [{} for _ in builders]
    for check, (count, examples) in judged.items():
        assert count == len(examples)
        for ex in examples:
            spark_found[int(ex["group"][1:])].setdefault(check, []).append(ex)
    twins = [reference(share_events(b.ops), b.samples if samples else None).anomalies
             for b in builders]  # fmt: skip
    return [
        (found, {k: v for k, v in twin.items() if v})
        for found, twin in zip(spark_found, twins, strict=True)
    ]


# The hand-made histories, by name, in the order of their namespaces: the sampled ones
# judged in one Spark job, the bare ones (fault lines alone) in another.
SAMPLED = [("evidence", False), ("evidence", True), ("one-tenure", False), ("one-tenure", True)]
BARE = [("evidence", False), ("evidence", True), ("old-holder", None)]


def _built(cases: list[tuple]) -> list[tuple[ShareBuilder, dict]]:
    out = []
    for hid, (name, same_member) in enumerate(cases):
        if name == "old-holder":
            out.append((_old_holders_ack(hid), {}))
        else:
            out.append(_evidence_shape(same_member, kill=name == "evidence", hid=hid))
    return out


@pytest.fixture(scope="module")
def judged(spark, tmp_path_factory) -> dict[tuple, dict]:
    """{(samples?, name, same_member): (Spark's findings, the twin's, the case's facts)}."""
    out = {}
    for samples, cases in ((True, SAMPLED), (False, BARE)):
        built = _built(cases)
        found = _judge(spark, tmp_path_factory.mktemp("tenures"), [b for b, _ in built], samples)
        for case, (_, facts), (spark_found, twin_found) in zip(cases, built, found, strict=True):
            out[(samples, *case)] = (spark_found, twin_found, facts)
    return out


@pytest.mark.parametrize("same_member", [False, True])
def test_the_evidence_shapes_are_allowed_after_the_leader_kill(judged, same_member):
    spark_found, twin_found, at = judged[(True, "evidence", same_member)]
    assert set(spark_found) == set(twin_found) == {LEADER_CHANGE}
    [ex] = spark_found[LEADER_CHANGE]
    who = "same member" if same_member else "another member"
    assert ex["how"] == twin_found[LEADER_CHANGE][0]["how"] == f"same delivery count, {who}"
    killed = f"{at['node']}, its leader, was killed at {at['killed_at'] / S:.1f} s"
    assert ex["change"] == twin_found[LEADER_CHANGE][0]["change"] == killed
    # a bare history: the kill line alone, and the finding says leadership was not recorded
    spark_found, twin_found, at = judged[(False, "evidence", same_member)]
    [ex] = spark_found[LEADER_CHANGE]
    assert ex["change"] == twin_found[LEADER_CHANGE][0]["change"]
    assert ex["change"].startswith(f"kill of {at['node']} at ")
    assert ex["change"].endswith("not recorded)")


@pytest.mark.parametrize("same_member", [False, True])
def test_the_same_shapes_within_one_tenure_are_errors(judged, same_member):
    spark_found, twin_found, _ = judged[(True, "one-tenure", same_member)]
    check = "share-delivery-count-stalled" if same_member else "share-double-acquire"
    assert set(spark_found) == set(twin_found) == {check}


def test_an_old_holders_ack_applied_after_a_new_leader_redelivered_is_still_an_error(
    judged,
) -> None:
    """(_old_holders_ack says why.)"""
    spark_found, twin_found, _ = judged[(False, "old-holder", None)]
    assert set(spark_found) == set(twin_found) == {"share-double-acquire"}
    assert spark_found["share-double-acquire"][0]["how"] == "ack applied after redelivery"
