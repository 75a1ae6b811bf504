"""The queue workload on Kafka's own Java client, producers and consumers, on the shared cluster.

The same fault-free run as the shared librdkafka one (CLEAN_RUN_ARGS), with
``--client java``: it must be valid, and its history must have the librdkafka
run's line shapes, so the checkers cannot tell which client wrote it.  Then a
leader is killed under Java producers while Java consumers crash and commit
by hand: failed and unknown sends appear, named by librdkafka's codes,
nothing acknowledged is lost, and the group's coverage holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli import kafka_chaos, ops, report_path, run_args, shapes
from kafka_chaos.harness import kafka_db
from kafka_chaos.workloads.producer import UNKNOWN_AT_SHUTDOWN

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def java_run(clean_runs) -> Path:
    """The Java half of the session's ``--client both`` clean run."""
    return clean_runs[0]["java"]


def test_client_both_runs_one_schedule_per_client_side_by_side(clean_runs) -> None:
    runs, stdout = clean_runs
    configs = {c: json.loads((run / "config.json").read_text()) for c, run in runs.items()}
    assert configs["librdkafka"]["seed"] == configs["java"]["seed"]
    assert {c: cfg["name"] for c, cfg in configs.items()} == {
        "librdkafka": "clean-librdkafka",
        "java": "clean-java",
    }
    schedules = [json.loads((run / "schedule.json").read_text())["ops"] for run in runs.values()]
    assert schedules[0] == schedules[1]
    assert "side by side" in stdout and "librdkafka valid, java valid" in stdout
    index = (runs["java"].parents[1] / "index.html").read_text()
    assert "librdkafka 2." in index and "Java 4.4.0" in index


def test_a_clean_java_producer_run_is_valid(java_run: Path) -> None:
    results = json.loads((java_run / "results.json").read_text())
    assert results["verdict"] == "valid", results["checks"]
    assert results["summary"]["acked"] > 0
    config = json.loads((java_run / "config.json").read_text())
    assert config["producer"]["client"] == config["consumer"]["client"] == "java"
    history = ops(java_run / "history.jsonl")
    # Auto commit on the Java client is the worker's, and recorded (workloads/java/consumer.py).
    assert any(op["f"] == "commit" and op["type"] == "ok" for op in history)
    assert any(op["f"] == "rebalance" and op["value"]["assigned"] for op in history)
    assert config["versions"]["kafka_clients"] == config["cluster"]["kafka_version"]


def test_java_history_has_the_librdkafka_runs_line_shapes(java_run: Path, clean_run: Path):
    java, librdkafka = shapes(java_run / "history.jsonl"), shapes(clean_run / "history.jsonl")
    assert any(s[0] == "send" for s in java)
    assert java == librdkafka, java ^ librdkafka


def test_a_leader_kill_under_the_java_client_loses_nothing(kafka_cluster, tmp_path) -> None:
    """Nothing acknowledged is lost or duplicated, what failed is named as
    librdkafka names it, and the Java consumers' group, crashing and
    committing by hand, still covers every partition without overlap.

    The verdict may still be invalid, for one reason only: the Java client can
    run a partition's callbacks out of order (a batch that timed out waiting
    for replicas after it was appended is retried and acknowledged after later
    batches; evidence/java-callbacks-out-of-order-4.4.0).  Then every
    nonmonotonic-send pair must be a later-sent value acknowledged first, at
    the higher offset: the log's order is the send order.
    """
    args = run_args(
        kafka_cluster, tmp_path, "--name", "java-kill", "--client", "java",
        "--consumer-crash-interval", "6", "--commit", "manual",
        "--time-limit", "25", "--faults", "kill", "--targets", "leader",
        "--fault-interval", "5", "--fault-duration", "8", "--rate", "300",
    )  # fmt: skip
    try:
        proc = kafka_chaos(*args)
    finally:
        kafka_db.recover_cluster(kafka_cluster)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr[-3000:]
    run = report_path(proc.stdout).parent
    results = json.loads((run / "results.json").read_text())
    for check in ("acked-lost", "lost-write", "duplicate", "inconsistent-offsets"):
        assert results["checks"][check]["count"] == 0, (check, results["checks"][check])
    failing = {n for n, c in results["checks"].items() if c["valid"] is False}
    assert failing <= {"nonmonotonic-send"}, failing
    history = ops(run / "history.jsonl")
    assert [op for op in history if op["f"] == "kill"], "no broker was killed"
    assert [op for op in history if op["f"] == "crash"], "no consumer crashed"
    commits = [op for op in history if op["f"] == "commit"]
    assert {"invoke", "ok"} <= {op["type"] for op in commits}, "manual commits are recorded"
    invoked = {
        op["value"]["value"]: op["index"]
        for op in history
        if op["f"] == "send" and op["type"] == "invoke"
    }
    by_index = {op["index"]: op for op in history}
    for example in results["checks"]["nonmonotonic-send"]["examples"]:
        first, second = (by_index[i]["value"] for i in example["indices"])
        assert second["offset"] < first["offset"]
        assert invoked[second["value"]] < invoked[first["value"]], example  # sent first
    errors = {
        op["value"]["error"] for op in history if op["f"] == "send" and "error" in op["value"]
    }
    # Whatever the client reported is named as librdkafka names it, then the Java class.
    reported = errors - {UNKNOWN_AT_SHUTDOWN}
    assert all(e.endswith("Exception)") and " (" in e for e in reported), reported
