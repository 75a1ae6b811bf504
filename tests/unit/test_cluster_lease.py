"""The cluster lease, with real processes holding real locks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from kafka_chaos.lease import ClusterBusy, cluster_lease, lease_path

HOLD = textwrap.dedent(
    """
    import sys, time
    from kafka_chaos.lease import cluster_lease
    with cluster_lease(sys.argv[1], sys.argv[2]):
        print("held", flush=True)
        time.sleep(60)
    """
)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_CHAOS_HOME", str(tmp_path))
    return tmp_path


def _holder(name: str, run_dir: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, name, run_dir],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_run_is_refused_naming_the_holder(home) -> None:
    proc = _holder("c1", "/store/queue/run-a")
    try:
        with pytest.raises(ClusterBusy) as err, cluster_lease("c1", "/store/queue/run-b"):
            pass
        assert str(err.value) == (
            f"cluster 'c1' is in use by run /store/queue/run-a (pid {proc.pid}); "
            "wait for it to end, or stop it"
        )
        with cluster_lease("c2", "/store/queue/run-b"):  # other clusters are free
            pass
    finally:
        proc.kill()
        proc.wait()


def test_a_dead_holders_lease_is_taken_over_and_logged(home, caplog) -> None:
    proc = _holder("c1", "/store/queue/run-a")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with caplog.at_level("WARNING"), cluster_lease("c1", "/store/queue/run-b"):
        held = json.loads(lease_path("c1").read_text())
        assert held == {"pid": os.getpid(), "run_dir": "/store/queue/run-b"}
    assert f"from run /store/queue/run-a (pid {proc.pid}), which died holding it" in caplog.text
    assert lease_path("c1").read_text() == ""


def test_a_cleanly_released_lease_is_free_without_a_takeover(home, caplog) -> None:
    with cluster_lease("c1", "r1"):
        pass
    t0 = time.monotonic()
    with caplog.at_level("WARNING"), cluster_lease("c1", "r2"):
        pass
    assert "taking over" not in caplog.text
    assert time.monotonic() - t0 < 1
