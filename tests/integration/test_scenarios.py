"""The seed-lab presets that the suite test does not cover assert their expected verdicts.

(broker-failover and pubsub-vs-queue run in test_run's two-scenario suite, the
first with rate-under-failure's availability threshold.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli import kafka_chaos, ops, report_path, run_args
from kafka_chaos.harness.cluster import Cluster

from kafka_chaos.shrink.cli import anomalies, default_anomalies

pytestmark = pytest.mark.integration


# The unclean fault heals 40 s after it starts (at about 47 s); 13 s more let the
# deposed leader rejoin and truncate before the run ends (the preset runs 75 s).
UNCLEAN_TIME = ("--time-limit", "60")


def run_scenario(cluster: Cluster, store: Path, name: str, *extra: str) -> Path:
    proc = kafka_chaos(*run_args(cluster, store, "--scenario", name, *extra))
    assert "expectation held" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return report_path(proc.stdout).parent


def test_consumer_failover_keeps_full_group_coverage(kafka_cluster: Cluster, tmp_path: Path):
    run = run_scenario(
        kafka_cluster,
        tmp_path,
        "consumer-failover",
        "--time-limit",
        "22",
        "--consumer-crash-interval",
        "7",
    )
    history = ops(run / "history.jsonl")
    crashes = [op for op in history if op["f"] == "crash"]
    assert crashes, "no consumer was crashed"
    # Members read the group's committed offsets after assignments and at the end.
    reads = [op["value"] for op in history if op["f"] == "committed" and op["type"] == "ok"]
    assert {r["at"] for r in reads} == {"assigned", "end"}, reads[:3]
    assert any(o >= 0 for r in reads for _, _, o in r["offsets"]), "no commit was ever read"
    results = json.loads((run / "results.json").read_text())
    checks = ("group-unowned", "group-double-ownership", "group-commit-past-unread")
    for check in (*checks, "commit-regression"):
        assert results["checks"][check]["count"] == 0, check


def test_consumer_failover_under_the_new_group_protocol(kafka_cluster: Cluster, tmp_path: Path):
    """KIP-848: the broker reassigns a crashed member's partitions; coverage holds."""
    # 22 s of the preset's 40, crashing every 7 s: still crashes, each reassigned.
    run = run_scenario(
        kafka_cluster, tmp_path, "consumer-failover-kip848",
        "--time-limit", "22", "--consumer-crash-interval", "7",
    )  # fmt: skip
    history = ops(run / "history.jsonl")
    subscribes = [op for op in history if op["f"] == "subscribe" and op["type"] == "ok"]
    assert subscribes and all(op["value"]["protocol"] == "consumer" for op in subscribes)
    assert [op for op in history if op["f"] == "crash"], "no consumer was crashed"
    results = json.loads((run / "results.json").read_text())
    for check in ("group-unowned", "group-double-ownership", "group-commit-past-unread"):
        assert results["checks"][check]["count"] == 0, check


@pytest.fixture(scope="module")
def unclean_run(kafka_cluster: Cluster, tmp_path_factory) -> Path:
    """One run of the classic reproduction, judged here and shrunk below."""
    store = tmp_path_factory.mktemp("unclean")
    proc = kafka_chaos(
        *run_args(kafka_cluster, store, "--scenario", "unclean-leader-election", *UNCLEAN_TIME)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "expectation held" in proc.stdout
    return report_path(proc.stdout).parent


def test_unclean_leader_election_loses_acknowledged_writes(unclean_run: Path):
    """The classic reproduction: the loss is counted, as warnings (unclean election's
    doc allows it), so the verdict is valid as expected and `run` exits 0."""
    run = unclean_run
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"] == "valid"
    lost = results["checks"]["lost-write"]["count"]
    truncated = results["checks"]["inconsistent-offsets"]["count"]
    assert lost + truncated > 0
    for check in ("lost-write", "unseen", "acked-lost", "inconsistent-offsets"):
        assert results["checks"][check]["severity"] == "warning", check
    # Acknowledged values are gone from the final log, counted whoever read them first.
    acked_lost = results["checks"]["acked-lost"]
    assert acked_lost["count"] > 0 and acked_lost["valid"] is False
    assert results["summary"]["acked_lost"] == acked_lost["count"]
    assert 0 < results["summary"]["acked_lost"] < results["summary"]["acked"]
    fault_end = [
        op
        for op in ops(run / "history.jsonl")
        if op["f"] == "unclean-election" and op["value"]["phase"] == "end"
    ]
    resolved = fault_end[0]["value"]["resolved"]
    assert resolved["isr_shrunk_to_leader"] is True
    assert resolved["elected"] not in (None, resolved["killed"])
    # The brokers' disks confirm it: the deposed leader's log, as it was before it
    # rejoined, held other values at offsets the new leader reused, and the rejoin
    # truncated them (server.log says so).
    replicas = json.loads((run / "replicas.json").read_text())
    assert replicas["error"] is None, replicas
    diverged = [p for p in replicas["partitions"] if p["diverged"]]
    assert diverged, replicas
    copies = [c for p in diverged for c in p["compared"] if c["source"] == "before-rejoin"]
    assert any(c["node"] == resolved["killed"] and c["agree"] is False for c in copies), copies
    assert sum(c["lost_values"] for c in copies) > 0
    assert all(p["agree"] is True for p in replicas["partitions"]), "live replicas resync"
    assert any(t["node"] == resolved["killed"] for t in replicas["truncations"])
    raw = run / diverged[0]["compared"][0]["raw"]
    assert raw.exists() and raw.stat().st_size > 0
    # The report leads with the loss and names the setting that allows it.
    page = (run / "report.html").read_text()
    assert f"Kafka lost {results['summary']['acked_lost']:,} of " in page
    assert "Allowed by unclean.leader.election.enable=true" in page


def test_shrinking_the_unclean_run_keeps_the_loss_in_a_shorter_run(unclean_run: Path):
    """One candidate on the real cluster, the run ended 10 s after the heal: it still
    loses acknowledged writes, so it is kept.  The run has no error (its loss is a
    warning), so the shrink keeps its warnings by default.  (Time cuts only: a run
    without the fault costs 80 s here to prove what tests/unit/test_shrink_search.py
    shows.)"""
    store = unclean_run.parents[1]
    proc = kafka_chaos(
        "shrink", str(unclean_run), "--cuts", "time", "--repeat", "1", "--max-runs", "1",
        "--confirm", "0", "--store", str(store), timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "no error found: keeping the run's warnings" in proc.stdout
    log = json.loads((unclean_run / "shrink.json").read_text())
    assert log["anomaly"] == sorted(_kept(unclean_run)) and "acked-lost" in log["anomaly"]
    steps = log["steps"]
    assert [(s["what"].split(" ")[0], s["kept"]) for s in steps] == [("end", True)], steps
    # Every verdict is the runs' own: each run's results say what the log says.
    for step in steps:
        for r in step["runs"]:
            assert bool(_found(Path(r["run"])) & set(log["anomaly"])) is r["failed"], r
    start, result = log["start"]["size"], log["result"]["size"]
    assert result["faults"] == start["faults"] == 1 and result["seconds"] < start["seconds"]
    shrunk = Path(steps[0]["runs"][-1]["run"])
    assert json.loads((shrunk / "results.json").read_text())["checks"]["acked-lost"]["count"] > 0
    assert (shrunk / "shrink.json").exists()
    assert 'id="shrunk"' in (shrunk / "report.html").read_text()
    assert f"kafka-chaos run --replay {shrunk}" in proc.stdout


def _kept(run: Path) -> set[str]:
    """What a shrink keeps by default: the run's errors, else its warnings."""
    return default_anomalies(json.loads((run / "results.json").read_text()))


def _found(run: Path) -> set[str]:
    """A candidate's findings of any severity, as the shrink judges them."""
    return anomalies(json.loads((run / "results.json").read_text()), errors_only=False)


def test_unclean_election_safe_settings_lose_nothing(kafka_cluster: Cluster, tmp_path: Path):
    """The same faults with min.insync.replicas=2 and unclean election off: writes may
    fail, but the final log holds every acknowledged one."""
    run = run_scenario(kafka_cluster, tmp_path, "unclean-leader-election-safe", *UNCLEAN_TIME)
    results = json.loads((run / "results.json").read_text())
    acked_lost = results["checks"]["acked-lost"]
    assert acked_lost["valid"] is True, acked_lost
    assert acked_lost["count"] == 0 and acked_lost["undecided"] == 0
    assert results["summary"]["acked_lost"] == 0 and results["summary"]["acked"] > 0
    bounds = [op["value"] for op in ops(run / "history.jsonl") if op["f"] == "drain"]
    assert len(bounds) == 3, bounds  # one per partition, each read to its high watermark
    assert all(b["reached"] >= b["high_watermark"] for b in bounds), bounds
    replicas = json.loads((run / "replicas.json").read_text())
    assert replicas["error"] is None and replicas["complete"] is True, replicas
    assert all(p["agree"] is True and not p["diverged"] for p in replicas["partitions"])
    copies = [c for p in replicas["partitions"] for c in p["compared"]]
    assert any(c["source"] == "before-rejoin" for c in copies), "the killed leader's log was kept"
