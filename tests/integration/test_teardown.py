"""`cluster down` after the harness was SIGKILLed while Kafka was starting.

`kafka-chaos cluster up --name a2` runs as a subprocess and is SIGKILLed as
soon as a broker process exists (Kafka starting, cluster not yet healthy).
One broker is additionally SIGSTOPped, as a pause fault would leave it.
`kafka-chaos cluster down --name a2` must then remove every process,
namespace, link, iptables rule, the cluster dir and finally the guard route.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from _local_leftovers import down, leftovers, pids_from_files, procs_mentioning
from kafka_chaos.harness.cluster import cluster_dir

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
]

NAME = "a2"
START_DEADLINE_S = 600  # first use may assemble the Kafka distribution from Maven


def _broker_pids(root: Path) -> list[int]:
    pids = []
    for f in root.glob("nodes/*/run/kafka.pid"):
        text = f.read_text().strip()
        if text.isdigit() and Path(f"/proc/{text}").exists():
            pids.append(int(text))
    return pids


def _down() -> subprocess.CompletedProcess[str]:
    return down(NAME)


def test_down_after_sigkill_while_kafka_starts(tmp_path: Path) -> None:
    assert _down().returncode == 0  # a leftover of an earlier, killed session
    root = cluster_dir(NAME)
    log = (tmp_path / "up.log").open("w")
    up = subprocess.Popen(
        ["kafka-chaos", "cluster", "up", "--name", NAME, "--nodes", "3"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while not _broker_pids(root):
            assert up.poll() is None, f"cluster up ended early: {(tmp_path / 'up.log').read_text()}"
            assert time.monotonic() < deadline, "no broker started in time"
            time.sleep(0.1)
        assert up.poll() is None, "cluster up finished before it could be killed mid-start"
        os.kill(up.pid, signal.SIGKILL)
        up.wait(10)
        state = json.loads((root / "cluster.json").read_text())
        slot = state["backend_state"]["slot"]
        time.sleep(1.0)  # let every broker that was being launched write its pid file
        brokers = _broker_pids(root)
        os.kill(brokers[0], signal.SIGSTOP)  # as a pause fault would leave it
        pids = pids_from_files(root)
        assert set(brokers) <= set(pids) and len(pids) >= 4  # >= 1 broker + 3 sshds
        assert set(brokers) <= set(procs_mentioning(root))
        # status of the wreck answers, bounded, and shows the (paused) broker
        started = time.monotonic()
        status = subprocess.run(
            ["kafka-chaos", "cluster", "status", "--name", NAME],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert status.returncode == 0, status.stderr
        assert f"kafka:{brokers[0]}" in status.stdout
        print(f"status of the half-started cluster took {time.monotonic() - started:.1f}s")
    finally:
        if up.poll() is None:
            os.kill(up.pid, signal.SIGKILL)
        log.close()
        down = _down()
    assert down.returncode == 0, down.stderr
    assert "route unreachable" in down.stdout
    assert leftovers(NAME, slot, root, pids) == []
    again = _down()
    assert again.returncode == 0 and "nothing to remove" in again.stdout
