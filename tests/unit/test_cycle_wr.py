"""G1c-wr, hand-written: a cycle that needs no ww edge is an error even while
ww edges are inferred (docs/results.md, "Cycle checks (Elle)").

Two concurrent committed transactions, T1 and T2, after T0 committed value 0
at t/0 offset 0.  T1 sends 1 (t/0 offset 1) and 3 (t/1 offset 0), T2 sends
2 (t/1 offset 1): so ww T1 -> T2 in t/1, and T1 polls T2's 2 (wr T2 -> T1),
a G1c through a ww edge, allowed.

* ``mutual_reads``: T2 polls T1's 1 (wr T1 -> T2): T1 and T2 each read the
  other's write before either committed, a cycle of wr edges alone: G1c-wr.
* ``reads_an_earlier_commit`` (the look-alike): T2 polls T0's 0 instead; the
  only cycle left needs the ww edge, so G1c-wr is 0 and the run is valid.

Judged by Spark and the real Elle (one batched job per config) and by the
pure-Python reference (testkit/reference_cycles.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka_chaos.checkers.catalog import checks_for, severities
from kafka_chaos.checkers.txn.cycle_checks import CYCLE_CHECKS, WR_CYCLE_CHECK, elle_missing

from testkit.builder import HistoryBuilder, poll_mop, send_mop
from testkit.reference_cycles import reported

CONFIG = {"workload": "txn", "txn": {"mode": "mixed", "isolation_level": "read_committed"}}
NO_WW = {**CONFIG, "checker": {"ww_deps": False}}
DRAINED = [("t", 0, 0, 0), ("t", 0, 1, 1), ("t", 1, 0, 3), ("t", 1, 1, 2)]

MISSING = elle_missing()
needs_elle = pytest.mark.skipif(MISSING is not None, reason=f"Elle unavailable: {MISSING}")


def _invoke(b: HistoryBuilder, process: int, mops: list[dict[str, Any]]) -> int:
    planned = [
        {"f": "poll"} if m["f"] == "poll" else {k: m[k] for k in ("f", "topic", "key", "value")}
        for m in mops
    ]
    return b.op(process, "invoke", "txn", {"group": None, "ops": planned})


def history(t2_reads: tuple[str, int, int, int]) -> list[dict[str, Any]]:
    """T0, then T1 and T2 open at once (both invoked before either commits)."""
    b = HistoryBuilder()
    b.txn(0, [send_mop(0, 0, 0)])
    t1 = [send_mop(1, 0, 1), send_mop(3, 1, 0), poll_mop([("t", 1, 1, 2)])]
    t2 = [send_mop(2, 1, 1), poll_mop([t2_reads])]
    _invoke(b, 1, t1)
    _invoke(b, 2, t2)
    b.op(1, "ok", "txn", {"group": None, "ops": t1})
    b.op(2, "ok", "txn", {"group": None, "ops": t2})
    b.assign(99, None, [("t", 0), ("t", 1)])
    b.poll(99, DRAINED, final=True)
    b.drain_bounds(99, "t", 0, 0, 2)
    b.drain_bounds(99, "t", 1, 0, 2)
    return b.ops


HISTORIES = {
    "mutual_reads": history(("t", 0, 1, 1)),
    "reads_an_earlier_commit": history(("t", 0, 0, 0)),
}


def judge(spark, tmp_path, config: dict[str, Any], names: list[str]) -> dict[str, dict]:
    from kafka_chaos.checkers.api import analyse
    from kafka_chaos.checkers.ingest.load import load_history

    from testkit.builder import write_histories

    path = write_histories(tmp_path / "cases.jsonl", (HISTORIES[n] for n in names))
    results = analyse(spark, load_history(spark, path), config, examples=None, stats=False)
    return {name: results[hid] for hid, name in enumerate(names)}


def test_g1c_wr_is_an_error_present_only_with_ww_edges():
    assert severities(CONFIG)[WR_CYCLE_CHECK] == severities(NO_WW)[WR_CYCLE_CHECK] == "error"
    assert WR_CYCLE_CHECK in [c.name for c in checks_for(CONFIG)]
    # G1c and its variants are these cycles
    assert WR_CYCLE_CHECK not in [c.name for c in checks_for(NO_WW)]
    assert WR_CYCLE_CHECK not in [c.name for c in checks_for({"workload": "queue"})]


def test_cycles_of_reads_are_information_under_read_uncommitted():
    """Such consumers read open transactions: two may each read the other's writes."""
    for config in (CONFIG, NO_WW):
        uncommitted = {**config, "txn": {**config["txn"], "isolation_level": "read_uncommitted"}}
        sev = severities(uncommitted)
        assert {sev[name] for name in (WR_CYCLE_CHECK, "G1c", "G1c-process")} == {"info"}
    assert severities(NO_WW)["G1c"] == "error"


def test_the_reference_counts_g1c_wr_only_for_a_cycle_of_reads():
    assert reported(HISTORIES["mutual_reads"]) == {"G1c": 1, WR_CYCLE_CHECK: 1}
    assert reported(HISTORIES["mutual_reads"], ww=False) == {"G1c": 1}
    assert reported(HISTORIES["reads_an_earlier_commit"]) == {"G1c": 1}
    assert reported(HISTORIES["reads_an_earlier_commit"], ww=False) == {}


@pytest.mark.slow
@needs_elle
def test_spark_and_elle_find_g1c_wr_and_not_in_the_look_alike(spark, tmp_path):
    judged = judge(spark, tmp_path, CONFIG, list(HISTORIES))
    bad = judged["mutual_reads"]
    g1c_wr = bad["checks"][WR_CYCLE_CHECK]
    assert g1c_wr["count"] >= 1 and g1c_wr["severity"] == "error" and g1c_wr["valid"] is False
    (ex,) = g1c_wr["examples"]
    assert ex["type"] == "G1c" and sorted(ex["cycle"]) == ex["indices"]
    assert [e.split(":")[0] for e in ex["edges"]] == ["wr", "wr"], ex
    assert bad["checks"]["G1c"]["count"] == 1 and bad["checks"]["G1c"]["severity"] == "info"
    assert bad["verdict"] == "invalid"

    fine = judged["reads_an_earlier_commit"]
    assert fine["checks"][WR_CYCLE_CHECK]["count"] == 0
    assert fine["checks"][WR_CYCLE_CHECK]["valid"] is True
    assert fine["checks"]["G1c"]["count"] == 1  # through the ww edge: allowed
    errors = [n for n, c in fine["checks"].items() if c["severity"] == "error" and c["count"]]
    assert errors == [] and fine["verdict"] == "valid", (errors, fine["unknown_reasons"])


@pytest.mark.slow
@needs_elle
def test_without_ww_edges_the_same_cycle_is_g1c_and_g1c_wr_is_left_out(spark, tmp_path):
    res = judge(spark, tmp_path, NO_WW, ["mutual_reads"])["mutual_reads"]
    assert WR_CYCLE_CHECK not in res["checks"]
    assert res["checks"]["G1c"]["count"] == 1 and res["checks"]["G1c"]["severity"] == "error"
    assert res["verdict"] == "invalid"


@pytest.mark.slow
def test_without_elle_g1c_wr_is_unknown_like_the_other_cycle_checks(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(
        "kafka_chaos.checkers.txn.cycle_checks.elle_missing", lambda: "no Elle here"
    )
    res = judge(spark, tmp_path, CONFIG, ["mutual_reads"])["mutual_reads"]
    for name in (*CYCLE_CHECKS, WR_CYCLE_CHECK):
        assert res["checks"][name]["valid"] == "unknown", name
    assert res["verdict"] == "unknown"
    assert any(WR_CYCLE_CHECK in r and "no Elle here" in r for r in res["unknown_reasons"])


@pytest.mark.slow
@needs_elle
def test_a_timeout_in_the_search_without_ww_edges_leaves_g1c_wr_unknown(
    spark, tmp_path, monkeypatch
):
    from kafka_chaos.checkers.txn import cycle_checks

    real = cycle_checks._elle

    def timing_out_without_ww(ops, links, names):
        found = real(ops, links, names)
        if all(e["kind"] != "ww" for e in links):  # the second search, G1c-wr's
            found["cycle-search-timeout"] = [{"anomaly-spec-type": "G1c"}]
        return found

    monkeypatch.setattr(cycle_checks, "_elle", timing_out_without_ww)
    res = judge(spark, tmp_path, CONFIG, ["reads_an_earlier_commit"])["reads_an_earlier_commit"]
    assert res["checks"][WR_CYCLE_CHECK]["valid"] == "unknown"
    assert "timed out" in res["checks"][WR_CYCLE_CHECK]["reason"]
    assert res["cycles"]["search_timeouts"] == 1
    assert res["verdict"] == "unknown"
