"""A Tansu cluster on the local backend: N broker namespaces plus one PostgreSQL
namespace, brought up by ``cluster up --broker tansu`` and removed whole by
``cluster down``, after a SIGKILL of ``cluster up`` too (the opt-in tier,
``./test.sh --tansu``).  The real binary, the real server, real namespaces.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from _local_leftovers import down, leftovers, pids_from_files  # noqa: E402
from kafka_chaos.harness import admin, tansu_build  # noqa: E402
from kafka_chaos.harness.cluster import cluster_dir  # noqa: E402
from kafka_chaos.harness.errors import HarnessError  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root")

NAME = os.environ.get("KC_TEST_CLUSTER", "kt1")
UP_TIMEOUT_S = 300


@pytest.fixture(autouse=True)
def _built() -> None:
    try:
        tansu_build.binary()
    except HarnessError as e:
        pytest.skip(str(e))


def _up(*more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kafka-chaos", "cluster", "up", "--broker", "tansu", "--name", NAME, *more],
        capture_output=True, text=True, timeout=UP_TIMEOUT_S, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def test_up_makes_brokers_and_a_storage_node_and_down_removes_every_trace() -> None:
    assert down(NAME).returncode == 0  # a leftover of an earlier, killed session
    started = time.monotonic()
    up = _up()
    took = time.monotonic() - started
    assert up.returncode == 0, up.stdout + up.stderr
    print(f"cluster up --broker tansu (3 brokers + PostgreSQL): {took:.1f} s")
    root = cluster_dir(NAME)
    state = json.loads((root / "cluster.json").read_text())
    assert state["broker"] == "tansu"
    brokers, (storage,) = state["nodes"], state["storage"]
    assert [n["name"] for n in brokers] == ["n1", "n2", "n3"] and storage["name"] == "n4"
    for n in brokers:  # each broker answers on its own, as node 111 (docs/brokers.md)
        assert admin.broker_ids(f"{n['address']}:9092", 10) == [111]
    data = Path(storage["root_dir"], "data", "postgres")
    assert (data / "PG_VERSION").is_file()
    assert "n4   │ storage" in up.stdout and "postgres:" in up.stdout
    again = _up()  # a second up reuses the running cluster
    assert again.returncode == 0 and "reusing cluster" in again.stdout, again.stderr
    slot, pids = state["backend_state"]["slot"], pids_from_files(root)
    assert len(pids) == 8  # 4 sshds, 3 brokers, PostgreSQL
    started = time.monotonic()
    gone = down(NAME)
    print(f"cluster down: {time.monotonic() - started:.1f} s")
    assert gone.returncode == 0, gone.stderr
    assert leftovers(NAME, slot, root, pids) == []
    assert not data.exists()


def test_down_after_a_sigkill_of_up_while_postgresql_starts(tmp_path: Path) -> None:
    assert down(NAME).returncode == 0
    root = cluster_dir(NAME)
    log = tmp_path / "up.log"
    with log.open("w") as out:
        up = subprocess.Popen(
            ["kafka-chaos", "cluster", "up", "--broker", "tansu", "--name", NAME],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + UP_TIMEOUT_S
        while not list(root.glob("nodes/*/run/postgres.pid")):
            assert up.poll() is None, f"cluster up ended early: {log.read_text()}"
            assert time.monotonic() < deadline, "PostgreSQL never started"
            time.sleep(0.05)
        os.killpg(up.pid, signal.SIGKILL)
        up.wait(timeout=10)
        time.sleep(1.0)  # the server writes its data directory on
        slot = json.loads((root / "cluster.json").read_text())["backend_state"]["slot"]
        pids = pids_from_files(root)
        (pg,) = [int(f.read_text()) for f in root.glob("nodes/*/run/postgres.pid")]
        os.kill(pg, signal.SIGSTOP)  # as a pause of the storage node would leave it
        assert (root / "nodes" / "n4" / "data" / "postgres").is_dir()
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
    gone = down(NAME)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert leftovers(NAME, slot, root, pids) == []
