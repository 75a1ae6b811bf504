"""`cluster down` after a mirror run was SIGKILLed mid-netsplit, MirrorMaker running.

A disaster-recovery run on a one-node dc1 (``a3``) brings up ``a3-dc2`` and the
MirrorMaker node ``a3-mm`` with its legs onto both bridges, starts MirrorMaker
and cuts dc1 off; the harness is then SIGKILLed, so nothing heals and nothing is
stopped.  `kafka-chaos cluster down --name a3` must remove all three clusters:
processes (brokers, MirrorMaker, sshds), namespaces (with the netsplit's rules),
bridges, legs, guard routes and directories.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from _local_leftovers import down, leftovers, pids_from_files
from kafka_chaos.harness.cluster import cluster_dir

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
]

NAME = "a3"
CLUSTERS = (NAME, f"{NAME}-dc2", f"{NAME}-mm")
DEADLINE_S = 300.0
RUN = {
    "name": "mirror-sigkill",
    "workload": "mirror",
    "time_limit_s": 120.0,
    "cluster": {"name": NAME, "nodes": 1},
    "topic": {"partitions": 3, "replication_factor": 1, "min_insync_replicas": 1},
    "producer": {"rate": 200.0},
    "consumer": {"groups": 1, "workers_per_group": 1},
    "nemesis": {
        "faults": ["netsplit"],
        "schedule": [
            {"id": 0, "f": "netsplit", "at_s": 3.0, "duration_s": 100.0, "targets": ["n1"]}
        ],  # fmt: skip
    },
    "mirror": {"enabled": True, "failover_at_s": 5.0},
}


def _down() -> subprocess.CompletedProcess[str]:
    return down(NAME)


def _history(store: Path) -> list[dict]:
    found = sorted(store.glob("*/*/history.jsonl"))
    if not found:
        return []
    lines = found[-1].read_text().splitlines()
    return [json.loads(line) for line in lines[:-1]]  # the last may be half written


def test_down_after_sigkill_of_a_mirror_run_mid_netsplit(tmp_path: Path) -> None:
    assert _down().returncode == 0  # a leftover of an earlier, killed session
    config = tmp_path / "mirror.json"
    config.write_text(json.dumps(RUN))
    store = tmp_path / "store"
    log = (tmp_path / "run.log").open("w")
    run = subprocess.Popen(
        ["kafka-chaos", "run", "--config", str(config), "--store", str(store)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not any(op["f"] == "failover" and op["value"]["phase"] == "end"
                      for op in _history(store)):  # fmt: skip
            assert run.poll() is None, f"the run ended early: {(tmp_path / 'run.log').read_text()}"
            assert time.monotonic() < deadline, "no failover in time"
            time.sleep(0.5)
        os.kill(run.pid, signal.SIGKILL)
        run.wait(10)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    slots, pids = {}, {}
    for name in CLUSTERS:
        state = json.loads((cluster_dir(name) / "cluster.json").read_text())
        slots[name] = state["backend_state"]["slot"]
        pids[name] = pids_from_files(cluster_dir(name))
    mm_pid = cluster_dir(f"{NAME}-mm") / "nodes" / "n1" / "run" / "mirrormaker.pid"
    assert mm_pid.exists() and int(mm_pid.read_text()) in pids[f"{NAME}-mm"]
    down = _down()
    assert down.returncode == 0, down.stdout + down.stderr
    left = [
        item
        for name in CLUSTERS
        for item in leftovers(name, slots[name], cluster_dir(name), pids[name])
    ]
    assert not left, left
