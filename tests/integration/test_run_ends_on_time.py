"""A run ends when asked: at its time limit, and within 30 s of SIGTERM.

Both on the shared cluster with faults active at the moment the run must
end, which is when the control plane used to hang (docs/control-plane.md).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _cli import kafka_chaos, ops, run_args
from _waiting import wait_for_history_line
from kafka_chaos.harness import kafka_db
from kafka_chaos.harness.cluster import Cluster

pytestmark = pytest.mark.integration

FAULTS_EVERY_SECOND = ["--fault-interval", "1", "--rate", "300", "--seed", "11"]


def _client_ops(history: Path) -> list[dict]:
    """Every workload operation of the run phase (not the nemesis, not the final drain)."""
    return [
        op
        for op in ops(history)
        if op["process"] != "nemesis" and not (op.get("value") or {}).get("final")
    ]


def _assert_healed(cluster: Cluster, history: Path) -> None:
    faults = [op for op in ops(history) if op["process"] == "nemesis"]
    started = {op["value"]["id"] for op in faults if op["value"]["phase"] == "start"}
    ended = {op["value"]["id"] for op in faults if op["value"]["phase"] == "end"}
    assert started and started == ended, "every started fault must be healed"
    for node in cluster.nodes:
        assert kafka_db.is_running(node), f"{node.name}'s broker is down"
        assert "kafka-chaos:" not in node.run("iptables -w 5 -S", timeout=20).stdout
        pid = node.run(f"cat {node.path('run', 'kafka.pid')}", timeout=20).stdout.strip()
        assert "State:\tT" not in Path(f"/proc/{pid}/status").read_text()


def test_a_five_second_run_stops_its_workload_within_fifteen_seconds(
    kafka_cluster: Cluster, tmp_path: Path
) -> None:
    proc = kafka_chaos(
        *run_args(kafka_cluster, tmp_path, "--name", "short", "--time-limit", "5"),
        "--faults",
        "kill,pause,partition",
        "--fault-duration",
        "2",
        *FAULTS_EVERY_SECOND,
    )
    assert proc.returncode in (0, 1, 2), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert " WARN " not in proc.stderr, "Spark's and Java's WARN lines belong in harness.log"
    (history,) = tmp_path.glob("short/*/history.jsonl")
    times = [op["time"] for op in _client_ops(history)]
    assert (max(times) - min(times)) / 1e9 <= 15.0
    _assert_healed(kafka_cluster, history)


def test_sigterm_mid_kill_heals_and_exits_130_within_thirty_seconds(
    kafka_cluster: Cluster, tmp_path: Path
) -> None:
    args = run_args(kafka_cluster, tmp_path, "--name", "sigterm", "--time-limit", "120")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_chaos.cli", *args, "--faults", "kill", "--fault-duration",
         "60", *FAULTS_EVERY_SECOND],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        history = wait_for_history_line(tmp_path, "sigterm", '"f":"kill"', timeout_s=240)
        time.sleep(2)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    assert took <= 30.0, f"exited {took:.1f}s after SIGTERM"
    assert "Traceback" not in out + err
    _assert_healed(kafka_cluster, history)
    kafka_db.wait_healthy(kafka_cluster, timeout_s=120)
