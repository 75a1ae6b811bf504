"""The mirror checks: on generated two-cluster histories the reference finds exactly the
injected anomaly and no false one, the Spark checks agree with the reference on every
history (judged together in one Spark job), and a mirror run's whole check keeps the
queue family's verdicts per cluster."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from kafka_chaos.checkers.api import check_history
from kafka_chaos.checkers.mirror.mirror_checks import judge_mirror
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.reports.mirror import COUNTED, answers
from kafka_chaos.reports.render import write_report
from kafka_chaos.workloads.mirror_spec import MirrorSpec

from testkit.builder import HistoryBuilder, write_histories
from testkit.reference_mirror import judge_mirror as reference
from testkit.synthetic_mirror import EXPECTED, KINDS, VALUES_PER_HISTORY, generate_fit, ops

SEED = int(os.environ.get("CHECKER_PROPERTY_SEED", "20261127"))
EXAMPLES = int(os.environ.get("MIRROR_PROPERTY_EXAMPLES", "30"))
COLLECTED: list[tuple[str, int]] = []  # (kind, seed), in history-id order


def found(history_ops: list[dict]) -> dict[str, int]:
    return {k: len(v) for k, v in reference(history_ops).items() if v}


@pytest.mark.parametrize("kind", KINDS)
@seed(SEED)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history_seed=st.integers(0, 2**62))
def test_reference_finds_exactly_the_injected_anomaly(kind: str, history_seed: int) -> None:
    judged = found(ops(generate_fit(0, kind, history_seed)))
    judged.pop("failover-reread", None)  # legal, in most histories: compared with Spark below
    assert judged == EXPECTED[kind]
    COLLECTED.append((kind, history_seed))


def test_spark_agrees_with_the_reference_on_every_history(spark, tmp_path) -> None:
    if not COLLECTED:
        pytest.skip("run together with the reference property test")
    histories = [ops(generate_fit(hid, kind, s)) for hid, (kind, s) in enumerate(COLLECTED)]
    path = write_histories(tmp_path / "mirror.jsonl", histories)
    anomalies, _stats = judge_mirror(spark, path, examples=None)
    by_history: dict[int, Counter] = {hid: Counter() for hid in range(len(COLLECTED))}
    for check, (count, examples) in anomalies.items():
        assert count == len(examples)
        for ex in examples:
            by_history[ex["value"] // VALUES_PER_HISTORY][check] += 1
    mismatches = [
        (hid, kind, dict(by_history[hid]), found(h))
        for hid, ((kind, _), h) in enumerate(zip(COLLECTED, histories, strict=True))
        if dict(by_history[hid]) != found(h)
    ]
    assert not mismatches, mismatches[:5]
    assert sum(c["failover-reread"] for c in by_history.values()) > 0  # the legal kind is there
    # Some acks carry no offset (testkit/synthetic_mirror.py's _acked_at), on both clusters.
    acks = [op["value"] for h in histories for op in h if op["f"] == "send" and op["type"] == "ok"]
    unplaced = {v["topic"].startswith("dc2/") for v in acks if v["offset"] is None}
    assert unplaced == {False, True}


def _small_run(
    dc2_ends: list | None = None, unplaced: frozenset[int] = frozenset(), lost: bool = False
) -> HistoryBuilder:
    """dc1 gets 0..5 (partition 0), the group reads 0..3, MirrorMaker copies 0..3 before
    the failover (dc2 ends at 4) and 4..5 after the heal; the group reads dc2 from 2.
    ``dc2_ends``: what dc2 answered for its ends as the failover began.  ``unplaced``:
    values acked without an offset (a batch answered DUPLICATE_SEQUENCE_NUMBER,
    workloads/delivery_offsets.py).  ``lost``: value 9 too, acked so before the
    failover, then in no log."""
    b = HistoryBuilder()
    b.subscribe(1, "g", ["t"])
    for v in range(6):
        b.send(0, v, partition=0, offset=None if v in unplaced else v, topic="t")
        b.advance(1.0)
    if lost:
        b.send(0, 9, partition=0, offset=None, topic="t")
    b.poll(1, [("t", 0, o, o) for o in range(4)])
    b.op(1, "info", "leave", {"group": "g"})
    b.fault("failover", 900, "start", [], planned_s=6.0, at_s=6.0)
    b.fault("failover", 900, "end", [], groups={"dc2/g": [["dc2/t", 0, 2, 4]]},
            dc2_ends=[["dc2/t", 0, 4]] if dc2_ends is None else dc2_ends)  # fmt: skip
    b.subscribe(2, "dc2/g", ["dc2/t"])
    b.send(0, 6, partition=0, offset=6, topic="dc2/t")
    b.poll(2, [("dc2/t", 0, o, o) for o in range(2, 7)])
    b.op("nemesis", "info", "mirror-caught-up",
         {"caught_up": True, "waited_s": 1.0, "behind": [], "copied": [["t", 0, 5]]})  # fmt: skip
    b.poll(3, [("t", 0, o, o) for o in range(6)], final=True)
    b.poll(4, [("dc2/t", 0, o, o) for o in range(7)], final=True)
    for process, topic, end in ((3, "t", 6), (4, "dc2/t", 7)):
        b.drain_bounds(process, topic, 0, 0, end)
    return b


def test_rpo_counts_what_dc2_lacked_when_the_failover_began(spark, tmp_path) -> None:
    anomalies, stats = judge_mirror(spark, _small_run().write(tmp_path / "h.jsonl"), None)
    # Values 4 and 5 were acked at 4 s and 5 s, before the failover at 6 s, and dc2 ended
    # at offset 4 then: two values, the oldest acked 2 s before the failover, copied later.
    assert (stats["rpo_values"], stats["copied_later"]) == (2, 2)
    assert stats["rpo_seconds"] == pytest.approx(2.0, abs=0.05)  # the builder's 1 ms per line
    assert stats["acked_before"] == 6 and stats["mirrored"] == 6
    assert anomalies["failover-reread"][0] == 2  # 2 and 3: read on dc1 and again on dc2
    assert set(anomalies) == {"failover-reread"}


def test_a_partition_dc2_did_not_answer_for_has_no_measured_rpo(spark, tmp_path) -> None:
    """dc2's broker down as the failover began: no end for partition 0, so its six
    acknowledged values are counted as unmeasured, neither lost nor safe."""
    _, stats = judge_mirror(spark, _small_run(dc2_ends=[]).write(tmp_path / "h.jsonl"), None)
    assert (stats["rpo_values"], stats["rpo_unmeasured"], stats["acked_before"]) == (0, 6, 6)
    counts = dict.fromkeys(COUNTED, 0)
    (answer,) = [a for a in answers(stats, counts, {}) if "lose?" in a]
    assert "Not measured" in answer and "of the 6 values dc1 had acknowledged" in answer
    # And a failover that found no checkpoint says why the group read everything again.
    counts["failover-reread"] = 4
    told = answers({**stats, "translated": {"dc2/g": []}}, counts, {})
    assert any("no checkpoint for the group" in a for a in told)
    assert not any("no checkpoint" in a for a in answers(stats, counts, {}))


def test_a_mirror_run_keeps_each_clusters_queue_verdict(spark, tmp_path) -> None:
    """The copies on dc2 are no duplicates, dc1's group leaving is no unowned partition,
    and the failover's position owes no reads below it: valid, with the mirror stats."""
    path = _small_run().write(tmp_path / "history.jsonl")
    config = TestSpec(workload="mirror", sections={"mirror": MirrorSpec(enabled=True)}).to_dict()
    config["nemesis"]["faults"] = []
    results = check_history(path, config, out=tmp_path / "results.json")
    bad = {n: c for n, c in results["checks"].items() if c.get("count")}
    assert results["verdict"] == "valid", json.dumps(bad)[:2000]
    assert results["checks"]["failover-reread"]["count"] == 2
    assert results["stats"]["mirror"]["rpo_values"] == 2
    # The report answers the seed lab's questions from these figures.
    (tmp_path / "config.json").write_text(json.dumps(config))
    html = write_report(tmp_path).read_text()
    assert 'id="mirror"' in html and "per second, on each data centre" in html
    assert "dc2 lacked 2 of the 6 values dc1 had acknowledged" in html
    assert "The group read 2 values again on dc2" in html
    assert "What did it skip? Nothing" in html
    assert "Were writes disrupted?" in html and "Were reads disrupted?" in html


def _without(stats: dict, *keys: str) -> dict:
    return {k: v for k, v in stats.items() if k not in keys}


def test_acks_without_an_offset_change_no_mirror_finding(spark, tmp_path) -> None:
    """dc1's sends of 1 and 4 acked without an offset: the mirror checks place values by
    the drains, so every finding and figure is the placed run's; the whole check (the
    queue family per cluster too) stays valid."""
    placed = judge_mirror(spark, _small_run().write(tmp_path / "a.jsonl"), None)
    path = _small_run(unplaced=frozenset({1, 4})).write(tmp_path / "history.jsonl")
    assert judge_mirror(spark, path, None) == placed
    config = TestSpec(workload="mirror", sections={"mirror": MirrorSpec(enabled=True)}).to_dict()
    config["nemesis"]["faults"] = []
    results = check_history(path, config, out=tmp_path / "results.json")
    bad = {n: c for n, c in results["checks"].items() if c.get("count")}
    assert results["verdict"] == "valid", json.dumps(bad)[:2000]
    assert set(bad) == {"failover-reread"}


def test_an_ack_without_an_offset_in_no_log_is_lost_on_dc1_and_missing_on_dc2(
    spark, tmp_path
) -> None:
    """Value 9, acked on dc1 without an offset before the failover, is in neither drain:
    not mirror-lost (dc1's log never held it where MirrorMaker copied from), but one more
    value dc2 lacked at the failover, and acked-lost on dc1."""
    path = _small_run(lost=True).write(tmp_path / "history.jsonl")
    anomalies, stats = judge_mirror(spark, path, None)
    _, placed = judge_mirror(spark, _small_run().write(tmp_path / "a.jsonl"), None)
    assert set(anomalies) == {"failover-reread"}
    assert (stats["rpo_values"], stats["acked_before"]) == (3, 7)
    assert stats["copied_later"] == 2  # 4 and 5; 9 never reached dc2
    moved = ("rpo_values", "acked_before", "rpo_seconds", "failover_at_s")  # 9's lines: 2 ms
    assert _without(stats, *moved) == _without(placed, *moved)
    config = TestSpec(workload="mirror", sections={"mirror": MirrorSpec(enabled=True)}).to_dict()
    config["nemesis"]["faults"] = []
    results = check_history(path, config, out=tmp_path / "results.json")
    lost = results["checks"]["acked-lost"]
    assert (lost["count"], lost["examples"][0]["value"]) == (1, 9), lost
    assert results["checks"]["unseen"]["count"] == 1
    assert results["checks"]["lost-write"]["count"] == 0  # no offset to be read past
