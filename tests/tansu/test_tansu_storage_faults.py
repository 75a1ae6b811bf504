"""Faults on the storage node a Tansu cluster's brokers share (nemeses/storage.py):
PostgreSQL killed, paused, and cut off from a broker, in one run that still ends
with a verdict, its storage read back, and nothing of the faults left behind
(the opt-in tier, ``./test.sh --tansu``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from _tansu_cluster import fresh_cluster  # noqa: E402
from kafka_chaos.harness import postgres_db  # noqa: E402
from kafka_chaos.harness.backends import load_cluster  # noqa: E402
from kafka_chaos.nemeses import partition  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root")

NAME = os.environ.get("KC_TEST_CLUSTER", "kt1")
FAULTS = ("storage-kill", "storage-pause", "storage-partition")


@pytest.fixture
def cluster() -> object:
    yield from fresh_cluster(NAME)


def test_postgresql_killed_paused_and_cut_off_then_healed(cluster: str, tmp_path: Path) -> None:
    started = time.monotonic()
    done = subprocess.run(
        ["kafka-chaos", "run", "--broker", "tansu", "--cluster-name", NAME, "--store",
         str(tmp_path), "--time-limit", "90", "--faults", ",".join(FAULTS)],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    print(f"run with storage faults: {time.monotonic() - started:.0f} s")
    assert done.returncode in (0, 1, 2), done.stdout + done.stderr
    (run,) = list((tmp_path / "queue").glob("2*"))
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"] in ("valid", "invalid", "unknown")
    schedule = json.loads((run / "schedule.json").read_text())
    done_faults = [op for op in schedule["ops"] if op.get("ended_s") is not None]
    assert {op["f"] for op in done_faults} == set(FAULTS), schedule["ops"]
    for line in (run / "history.jsonl").read_text().splitlines():  # the heals' own account
        op = json.loads(line)
        if op["process"] == "nemesis" and op["f"] in FAULTS:
            print(op["f"], json.dumps(op["value"]))
    stored = json.loads((run / "storage-evidence.json").read_text())
    assert stored["acknowledged"] == results["summary"]["acked"]
    print(json.dumps({k: v for k, v in stored.items() if k != "examples"}))
    print(json.dumps(results["summary"]))
    healed = load_cluster(NAME)  # healed: PostgreSQL serves, no cut is left on any broker
    try:
        assert postgres_db.ready(healed.storage[0])
        for node in healed.nodes:
            rules = node.run(f"{partition.IPTABLES} -S", timeout=20).stdout
            assert partition.tag(NAME, "") not in rules
    finally:
        healed.close()
