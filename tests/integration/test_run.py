"""`kafka-chaos run` end to end on the shared cluster: verdicts, exit codes, SIGINT.

Each run is a real subprocess of the CLI against the real 3-node cluster, so
these tests cover exactly what a user types.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _cli import kafka_chaos, ops, run_args, write_ops
from _waiting import wait_for_history_line
from kafka_chaos.harness import kafka_db
from kafka_chaos.harness.backends import cluster_exists
from kafka_chaos.harness.cluster import Cluster

pytestmark = pytest.mark.integration


def test_clean_run_is_valid_and_reported(clean_run: Path):
    results = json.loads((clean_run / "results.json").read_text())
    assert results["verdict"] == "valid"
    assert results["final_drain"] is True
    html = (clean_run / "report.html").read_text()
    assert "VALID" in html.upper()
    for name in ("config.json", "history.jsonl", "cluster-state.jsonl", "schedule.json"):
        assert (clean_run / name).stat().st_size > 0, name
    assert any((clean_run / "logs").rglob("server.log")), "node logs were not collected"
    assert (clean_run.parents[1] / "index.html").exists()


def test_injected_lost_write_is_invalid_and_shown(clean_run: Path, tmp_path: Path):
    """Erase every read of one acked value that has later reads in its partition."""
    run = tmp_path / "lost"
    subprocess.run(["cp", "-r", str(clean_run), str(run)], check=True)
    history = run / "history.jsonl"
    rows = ops(history)
    acked = [op["value"] for op in rows if op["f"] == "send" and op["type"] == "ok"]
    victim = acked[len(acked) // 2]
    for op in rows:
        if op["f"] == "poll" and op["type"] == "ok":
            op["value"]["records"] = [
                r for r in op["value"]["records"] if r["value"] != victim["value"]
            ]
    write_ops(history, rows)
    (run / "results.json").unlink()
    proc = kafka_chaos("check", str(run), "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    results = json.loads(proc.stdout)
    assert results["verdict"] == "invalid"
    lost = results["checks"]["lost-write"]
    assert lost["count"] == 1
    assert lost["examples"][0]["value"] == victim["value"]
    assert lost["examples"][0]["offset"] == victim["offset"]
    assert kafka_chaos("report", str(run)).returncode == 0
    html = (run / "report.html").read_text()
    assert "INVALID" in html.upper()
    assert str(victim["value"]) in html


def test_unread_acks_without_final_drain_are_unknown(clean_run: Path, tmp_path: Path):
    """No final drain and an acked value nobody read: the verdict cannot be valid."""
    run = tmp_path / "nodrain"
    subprocess.run(["cp", "-r", str(clean_run), str(run)], check=True)
    history = run / "history.jsonl"
    rows = [op for op in ops(history) if not (op["value"] or {}).get("final")]
    last_ack = max(
        (op for op in rows if op["f"] == "send" and op["type"] == "ok"),
        key=lambda op: (op["value"]["partition"] == 0, op["value"]["offset"]),
    )["value"]

    def beyond(partition: int, offset: int) -> bool:
        return partition == last_ack["partition"] and offset >= last_ack["offset"]

    for op in rows:
        if op["f"] == "poll" and op["type"] == "ok":
            op["value"]["records"] = [
                r for r in op["value"]["records"] if not beyond(r["partition"], r["offset"])
            ]
        if op["f"] == "commit":  # nor did any group commit past it
            op["value"]["offsets"] = [
                o for o in op["value"]["offsets"] if not beyond(o[1], o[2] - 1)
            ]
    write_ops(history, rows)
    proc = kafka_chaos("check", str(run))
    assert proc.returncode == 2, proc.stdout + proc.stderr


def test_harness_errors_exit_3_and_name_the_problem(tmp_path: Path):
    proc = kafka_chaos(
        "run",
        "--cluster-name",
        "kc-badver",
        "--kafka-version",
        "0.0.1",
        "--store",
        str(tmp_path),
        timeout=300,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "0.0.1" in proc.stderr
    assert not cluster_exists("kc-badver"), "a failed fetch must not leave a cluster behind"
    bad = tmp_path / "bad.yaml"
    bad.write_text("producer: {acks: maybe}\n")
    proc = kafka_chaos("run", "--config", str(bad), "--store", str(tmp_path))
    assert proc.returncode == 3
    assert "acks" in proc.stderr


def test_sigint_mid_fault_leaves_the_cluster_healed(kafka_cluster: Cluster, tmp_path: Path):
    """Ctrl-C while a node is paused and another partitioned: exit 130, all healed."""
    args = run_args(
        kafka_cluster,
        tmp_path,
        "--name",
        "sigint",
        "--time-limit",
        "120",
        "--faults",
        "pause,partition",
        "--fault-interval",
        "1",
        "--fault-duration",
        "60",
        "--rate",
        "200",
        "--seed",
        "7",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_chaos.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        history = wait_for_history_line(tmp_path, "sigint", '"process":"nemesis"', timeout_s=240)
        time.sleep(3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    starts = [
        op for op in ops(history) if op["process"] == "nemesis" and op["value"]["phase"] == "start"
    ]
    ends = [
        op for op in ops(history) if op["process"] == "nemesis" and op["value"]["phase"] == "end"
    ]
    assert starts and len(ends) == len(starts), "every started fault must be healed"
    for node in kafka_cluster.nodes:
        rules = node.run("iptables -w 5 -S", timeout=20).stdout
        assert "kafka-chaos:" not in rules, f"{node.name} still has partition rules"
        pid = node.run(f"cat {node.path('run', 'kafka.pid')}", timeout=20).stdout.strip()
        state = Path(f"/proc/{pid}/status").read_text()
        assert "State:\tT" not in state, f"{node.name}'s broker is still paused"
    kafka_db.wait_healthy(kafka_cluster, timeout_s=120)


def test_two_scenario_suite_writes_junit_and_index(kafka_cluster: Cluster, tmp_path: Path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: mini\n"
        "scenarios:\n"
        "  - scenario: broker-failover\n"
        # A kill at 2.5-7.5 s that heals by 21.5 s, whatever the seed. 14 s, not
        # less: when the killed leader is also the KRaft active controller, every
        # acks=all send waits ~2 s for a new controller plus the 6 s broker session
        # before the dead broker leaves the ISRs (7.9 s seen in CI; a 9 s kill then
        # held only 791 msg/s).
        f"    options: {{time_limit_s: 26, cluster: {{name: {kafka_cluster.name}}},"
        " nemesis: {interval_s: 5, duration_s: 14},"
        " checker: {availability_min_rate: 800.0}}\n"  # rate-under-failure's promise
        "  - scenario: pubsub-vs-queue\n"  # its producers on the Java client, in a child process
        f"    options: {{time_limit_s: 15, cluster: {{name: {kafka_cluster.name}}},"
        " producer: {client: java}}\n"
    )
    proc = kafka_chaos("suite", str(suite), "--store", str(tmp_path / "store"), timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import xml.etree.ElementTree as ET

    root = ET.parse(tmp_path / "store" / "mini-junit.xml").getroot()
    cases = list(root.iter("testcase"))
    assert [c.get("name") for c in cases] == ["broker-failover", "pubsub-vs-queue"]
    assert all(c.find("failure") is None and c.find("error") is None for c in cases)
    index = (tmp_path / "store" / "index.html").read_text()
    assert "broker-failover" in index and "pubsub-vs-queue" in index
    # broker-failover killed a partition leader, and leadership moved.
    run = next((tmp_path / "store" / "broker-failover").iterdir())
    history = ops(run / "history.jsonl")
    kills = [op for op in history if op["f"] == "kill" and op["value"]["phase"] == "start"]
    assert kills, "broker-failover injected no kill"
    # And 1000 msg/s held at 800 or more while the leader was down.
    results = json.loads((run / "results.json").read_text())
    availability = results["stats"]["availability"]
    assert availability["threshold"] == 800.0 and availability["faults"], availability
    assert results["checks"]["availability"]["valid"] is True
    # Within one group, every message is read exactly once (nothing crashed).
    groups = _reads_per_group(tmp_path / "store" / "pubsub-vs-queue")
    assert len(groups) == 2
    acked = {
        op["value"]["value"]
        for op in ops(_only_run(tmp_path / "store" / "pubsub-vs-queue"))
        if op["f"] == "send" and op["type"] == "ok"
    }
    config = json.loads(
        (_only_run(tmp_path / "store" / "pubsub-vs-queue").parent / "config.json").read_text()
    )
    assert config["producer"]["client"] == "java" and acked
    for group, reads in groups.items():
        # Consumers stop just after the producers, so the last few acks may be unread.
        assert len(set(reads) & acked) >= 0.99 * len(acked), f"group {group} missed messages"
        assert len(reads) == len(set(reads)), f"group {group} read a message twice"


def _only_run(test_dir: Path) -> Path:
    (run,) = [p for p in test_dir.iterdir() if p.is_dir()]
    return run / "history.jsonl"


def _reads_per_group(test_dir: Path) -> dict[str, list[int]]:
    group_of: dict[int, str] = {}
    reads: dict[str, list[int]] = {}
    for op in ops(_only_run(test_dir)):
        value = op.get("value") or {}
        if isinstance(op["process"], int) and isinstance(value, dict) and value.get("group"):
            group_of.setdefault(op["process"], value["group"])
        if op["f"] == "poll" and op["type"] == "ok" and not value.get("final"):
            group = group_of.get(op["process"])
            if group:
                reads.setdefault(group, []).extend(r["value"] for r in value["records"])
    return reads
