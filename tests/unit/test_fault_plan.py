"""Faults off plan (checkers/fault_plan.py): planned against realised fault times,
on hand-made histories, in Spark, in the reference and in `kafka-chaos check`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka_chaos.checkers import fault_plan
from kafka_chaos.checkers.cli import summary_lines
from kafka_chaos.reports.timeline import summarize_history

from kafka_chaos.cli import main
from testkit import reference_stats
from testkit.builder import HistoryBuilder


def test_deviation_is_the_worse_edge_and_needs_both_figures_of_an_edge() -> None:
    assert fault_plan.deviation(10.0, 10.4, 18.0, 19.5) == 1.5
    assert fault_plan.deviation(10.0, 7.0, 18.0, 18.0) == 3.0  # early counts too
    assert fault_plan.deviation(10.0, None, 18.0, 18.25) == 0.25
    assert fault_plan.deviation(None, 10.0, None, 18.0) is None  # nothing planned: unknown
    assert fault_plan.deviation(10.0, 11.001, None, None) == 1.001  # rounded, not 1.00099...


@pytest.mark.parametrize(
    "deviation_s, healed, off",
    [
        (None, True, False),  # an older history: no deviation known, no flag
        (1.0, True, False),  # the tolerance itself is on plan
        (1.001, True, True),
        (0.0, False, True),  # never healed: off plan whatever its start
        (None, False, True),
    ],
)
def test_off_plan_rule(deviation_s: float | None, healed: bool, off: bool) -> None:
    assert fault_plan.off_plan(deviation_s, healed) is off


def _faults(b: HistoryBuilder) -> None:
    """Seven faults (schedule seconds): on plan, late start, late heal, exactly at the
    tolerance, an older line without times, never healed, and failed but on time."""
    plans: list[tuple[int, dict[str, Any], dict[str, Any] | None]] = [
        (1, {"planned_s": 10.0, "at_s": 10.4}, {"planned_s": 18.0, "at_s": 18.9}),
        (2, {"planned_s": 20.0, "at_s": 21.5}, {"planned_s": 28.0, "at_s": 28.0}),
        (3, {"planned_s": 30.0, "at_s": 30.0}, {"planned_s": 38.0, "at_s": 41.25}),
        (4, {"planned_s": 40.0, "at_s": 41.0}, {"planned_s": 48.0, "at_s": 47.0}),
        (5, {}, {}),
        (7, {"planned_s": 70.0, "at_s": 70.0, "error": "NemesisError: x"}, {"planned_s": 78.0}),
        (6, {"planned_s": 60.0, "at_s": 60.2}, None),
    ]
    offset = 0
    for fault_id, start, end in plans:
        b.fault("kill", fault_id, "start", ["n1"], **start)
        b.send(1, offset, 0, offset)
        if end is not None:
            b.fault("kill", fault_id, "end", ["n1"], **end)
        offset += 1
    b.assign(99, None, [("t", 0)])
    b.poll(99, [("t", 0, o, o) for o in range(offset)], final=True)


@pytest.fixture(scope="module")
def judged(spark, tmp_path_factory) -> tuple[dict[str, Any], list[dict[str, Any]], Path]:
    from kafka_chaos.checkers.api import analyse
    from kafka_chaos.checkers.ingest.load import load_history

    b = HistoryBuilder()
    _faults(b)
    path = b.write(tmp_path_factory.mktemp("plan") / "history.jsonl")
    return analyse(spark, load_history(spark, path), {})[0], b.ops, path


@pytest.mark.slow
def test_faults_off_plan_are_listed_with_their_plan(judged) -> None:
    results, ops, _ = judged
    plan = results["faults_off_plan"]
    assert (plan["tolerance_s"], plan["count"], plan["worst_deviation_s"]) == (1.0, 3, 3.25)
    by_id = {f["id"]: f for f in plan["faults"]}
    assert list(by_id) == [2, 3, 6]  # in start order
    assert by_id[2] == {
        "id": 2,
        "f": "kill",
        "targets": ["n1"],
        "planned_start_s": 20.0,
        "realised_start_s": 21.5,
        "planned_end_s": 28.0,
        "realised_end_s": 28.0,
        "deviation_s": 1.5,
        "healed": True,
        "indices": [4, 7],
    }
    assert by_id[3]["deviation_s"] == 3.25
    assert by_id[6]["healed"] is False and by_id[6]["realised_end_s"] is None
    assert by_id[6]["deviation_s"] == 0.2  # its start was on plan; its end never came
    assert plan == reference_stats.faults_off_plan(ops)


@pytest.mark.slow
def test_every_fault_says_how_far_it_ran_from_plan(judged) -> None:
    results, ops, _ = judged
    faults = {f["id"]: f for f in results["stats"]["availability"]["faults"]}
    assert faults[1]["deviation_s"] == 0.9 and faults[1]["off_plan"] is False
    assert faults[4]["deviation_s"] == 1.0 and faults[4]["off_plan"] is False
    assert faults[5]["deviation_s"] is None and faults[5]["off_plan"] is False
    # a fault that failed to start but ran on time is not off plan: this is about timing
    assert faults[7]["deviation_s"] == 0.0 and faults[7]["off_plan"] is False
    want = reference_stats.availability(ops)["faults"]
    assert results["stats"]["availability"]["faults"] == want


@pytest.mark.slow
def test_off_plan_faults_keep_the_verdict(judged) -> None:
    results, _, _ = judged
    assert results["verdict"] == "valid" and results["unknown_reasons"] == []
    assert all(c["count"] == 0 for c in results["checks"].values())


@pytest.mark.slow
def test_the_report_reads_the_same_plan_from_the_history(judged) -> None:
    results, _, path = judged
    from_history = fault_plan.summary(summarize_history(path).faults)
    strip = [{k: v for k, v in f.items() if k != "indices"} for f in from_history["faults"]]
    assert strip == [
        {k: v for k, v in f.items() if k != "indices"} for f in results["faults_off_plan"]["faults"]
    ]
    assert from_history["worst_deviation_s"] == 3.25


@pytest.mark.slow
def test_older_histories_flag_nothing_but_a_missing_end(spark, tmp_path) -> None:
    from kafka_chaos.checkers.api import analyse
    from kafka_chaos.checkers.ingest.load import load_history

    b = HistoryBuilder()
    b.fault("kill", 1, "start", ["n1"])
    b.send(1, 0, 0, 0)
    b.fault("kill", 1, "end", ["n1"])
    b.poll(99, [("t", 0, 0, 0)], final=True)
    results = analyse(spark, load_history(spark, b.write(tmp_path / "h.jsonl")), {})[0]
    assert results["faults_off_plan"] == {
        "tolerance_s": 1.0,
        "count": 0,
        "worst_deviation_s": None,
        "faults": [],
    }


def test_summary_lines_name_unknown_reasons_and_off_plan_faults() -> None:
    results = {
        "unknown_reasons": ["no send was acknowledged: ..."],
        "faults_off_plan": {"tolerance_s": 1.0, "count": 2, "worst_deviation_s": 3.25},
    }
    lines = summary_lines(results)
    assert lines[0] == "unknown: no send was acknowledged: ..."
    assert lines[1].startswith("2 fault(s) ran off plan (more than 1.0 s late or early")
    assert "worst deviation 3.25 s" in lines[1] and len(lines) == 2
    assert summary_lines({"faults_off_plan": {"count": 0}, "unknown_reasons": []}) == []
    assert summary_lines({"verdict": "valid"}) == []  # results.json of an older version


@pytest.mark.slow
def test_check_prints_one_line_about_faults_off_plan(spark, tmp_path, capsys) -> None:
    b = HistoryBuilder()
    _faults(b)
    path = b.write(tmp_path / "h.jsonl")
    assert main(["check", str(path)]) == 0  # valid: off plan is a flag, not an anomaly
    out = capsys.readouterr().out
    plan_lines = [line for line in out.splitlines() if "ran off plan" in line]
    assert len(plan_lines) == 1 and plan_lines[0].startswith("3 fault(s) ran off plan")
    assert main(["check", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["faults_off_plan"]["count"] == 3
