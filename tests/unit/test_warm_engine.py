"""The warm engine (issue 46): one Spark Connect server per suite, attached to by every
check, stopped by its pid and reaped when its owner was killed; a dead remote is one line.

The server tests start a real server (a JVM: tens of seconds on a loaded machine), so
they are ``slow``; the dead-remote test starts no JVM.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka_chaos.checkers import connect_server
from kafka_chaos.checkers.remote import LOCAL_HERE_ENV, REMOTE_ENV, address
from kafka_chaos.checkers.session import get_spark, shared_remote
from kafka_chaos.harness.backends import procs
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.harness.store import RunDir
from pyspark import SparkContext

from kafka_chaos.run import RunOutcome
from kafka_chaos.suite import run_suite
from testkit.builder import HistoryBuilder

REPO = Path(__file__).resolve().parents[2]


def _history(path: Path) -> Path:
    """A tiny drained history in which an acknowledged value is never read (invalid)."""
    b = HistoryBuilder()
    b.subscribe(10, "g", ["t"])
    b.rebalance(10, "g", assigned=[("t", 0)])
    for v in range(4):
        b.send(1, v, 0, v)
    b.poll(10, [("t", 0, v, v) for v in range(4)])
    b.commit(10, "g", [("t", 0, 4)])
    b.send(1, 9, 0, 4)
    b.send(2, 10, 0, 5)
    b.crash(10)
    b.assign(99, None, [("t", 0)])
    b.poll(99, [("t", 0, 5, 10)], final=True)
    return b.write(path)


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafka_chaos.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_dead_spark_remote_is_one_clear_line_within_seconds(tmp_path: Path) -> None:
    history = _history(tmp_path / "history.jsonl")
    url = f"sc://127.0.0.1:{_free_port()}"  # bound and closed: nothing listens
    t0 = time.monotonic()
    done = _cli("check", str(history), "--json", "--spark-remote", url, timeout=120)
    took = time.monotonic() - t0
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 3, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("kafka-chaos: error: Spark Connect server " + url)
    assert "not reachable (connection refused)" in lines[0]
    assert done.stdout == ""
    assert took < 60  # the probe is bounded (5 s); the rest is Python's start-up


def test_a_malformed_spark_remote_is_refused_before_the_run() -> None:
    done = _cli("run", "--spark-remote", "http://127.0.0.1:1", timeout=120)
    assert done.returncode == 2
    assert "--spark-remote 'http://127.0.0.1:1': expected sc://HOST:PORT" in done.stderr


def _suite(tmp_path: Path, names: list[str]) -> Path:
    lines = ["name: warm", "scenarios:"]
    for n in names:
        lines += [f"  - name: {n}", "    expect: invalid", "    options: {time_limit_s: 5}"]
    path = tmp_path / "suite.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_a_suite_of_three_starts_one_engine_and_stops_it(tmp_path, monkeypatch, caplog) -> None:
    """Each scenario's check runs in a process of its own (as a Java-client cell does),
    so only a server can be shared; each must attach, none may start a Spark."""
    monkeypatch.setenv("KAFKA_CHAOS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(REMOTE_ENV, raising=False)  # not the test session's engine
    monkeypatch.delenv(LOCAL_HERE_ENV, raising=False)
    history = _history(tmp_path / "history.jsonl")
    seen: list[dict] = []

    def check_in_a_child(spec: TestSpec, store: Path) -> RunOutcome:
        records = list(connect_server.records_dir().glob("*.json"))
        seen.extend(json.loads(r.read_text()) for r in records)
        done = _cli("-v", "check", str(history), "--json")
        assert "attached to Spark Connect server" in done.stderr, done.stderr[-2000:]
        assert "engine start" not in done.stderr, done.stderr[-2000:]
        verdict = json.loads(done.stdout[done.stdout.index("{") :])["verdict"]
        return RunOutcome(RunDir(store / spec.name), verdict, None)

    with caplog.at_level(logging.INFO):
        code = run_suite(_suite(tmp_path, ["a", "b", "c"]), tmp_path / "store", None,
                         run=check_in_a_child)  # fmt: skip
    starts = [r.getMessage() for r in caplog.records if "engine start" in r.getMessage()]
    assert code == 0  # three invalid verdicts, as expected
    assert len(starts) == 1, starts
    assert len(seen) == 3 and len({s["pid"] for s in seen}) == 1
    pid = seen[0]["pid"]
    assert not procs.alive(pid)
    assert not list(connect_server.records_dir().glob("*"))
    assert REMOTE_ENV not in os.environ


KEEPER = """
from kafka_chaos.checkers.session import get_spark
from kafka_chaos.engine import shared_engine
with shared_engine():
    kept = get_spark().range(10).localCheckpoint(eager=True)  # a cached relation on the server
print("stopped", flush=True)
"""


@pytest.mark.slow
def test_a_process_that_kept_a_table_exits_once_its_engine_stops(tmp_path: Path) -> None:
    """The kept table outlives the server; at exit its ``__del__`` must not retry
    against the stopped server for minutes (bench/brokers.py hung there)."""
    env = {k: v for k, v in os.environ.items() if k not in (REMOTE_ENV, LOCAL_HERE_ENV)}
    env["KAFKA_CHAOS_HOME"] = str(tmp_path / "home")
    owner = subprocess.Popen([sys.executable, "-c", KEEPER], stdout=subprocess.PIPE,
                             text=True, cwd=REPO, env=env)  # fmt: skip
    try:
        assert owner.stdout.readline().strip() == "stopped"  # type: ignore[union-attr]
        waited = time.monotonic()
        owner.wait(timeout=120)  # a hang, not a speed figure: the retries take minutes
        print(f"exited {time.monotonic() - waited:.1f} s after its engine stopped")
    finally:
        owner.kill()


OWNER = """
from kafka_chaos.checkers import connect_server
server = connect_server.start()
print(server.pid, flush=True)
import time
time.sleep(600)
"""


@pytest.mark.slow
def test_a_server_left_by_a_killed_owner_is_reaped_and_no_other(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KAFKA_CHAOS_HOME", str(tmp_path / "home"))
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        pid = int(owner.stdout.readline())  # type: ignore[union-attr]
        assert procs.alive(pid)
        assert connect_server.reap() == []  # its owner runs: left alone
        assert procs.alive(pid)
        owner.kill()  # SIGKILL: no finally, no atexit
        owner.wait()
        assert procs.alive(pid)
        assert connect_server.reap() == [pid]
        assert not procs.alive(pid)
        assert not list(connect_server.records_dir().glob("*"))
    finally:
        owner.kill()
        for record in connect_server.records_dir().glob("*.json"):  # a failed assert above
            leftover = json.loads(record.read_text())["pid"]
            if connect_server._ours(leftover, record):
                procs.terminate([leftover])


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sc://127.0.0.1:15099", ("127.0.0.1", 15099)),
        ("sc://spark-host", ("spark-host", 15002)),  # Spark Connect's default port
        ("sc://h:1234/;token=abc", ("h", 1234)),
    ],
)
def test_remote_addresses(url: str, expected: tuple[str, int]) -> None:
    assert address(url) == expected


@pytest.mark.parametrize("url", ["http://h:1", "sc://", "sc://h:0", "sc://h:99999", "h:15002"])
def test_malformed_remote_addresses(url: str) -> None:
    with pytest.raises(ConfigError, match="expected sc://HOST:PORT"):
        address(url)


def test_which_checks_attach_to_the_shared_engine(monkeypatch) -> None:
    """Only checks on the default local master, in a process that keeps no local session."""
    url = "sc://127.0.0.1:15099"
    monkeypatch.setenv(REMOTE_ENV, url)
    monkeypatch.delenv(LOCAL_HERE_ENV, raising=False)
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    assert shared_remote(None) == url
    assert shared_remote("local[2]") == url
    assert shared_remote("spark://host:7077") is None  # a master of its own: it runs there
    monkeypatch.setenv(LOCAL_HERE_ENV, str(os.getpid()))
    assert shared_remote(None) is None  # the test process keeps its local session
    monkeypatch.setenv(LOCAL_HERE_ENV, "1")
    assert shared_remote(None) == url  # another process's: this one is its child
    monkeypatch.delenv(REMOTE_ENV)
    assert shared_remote(None) is None


def test_a_process_with_a_local_session_keeps_it(spark, monkeypatch) -> None:
    """Local and Connect sessions cannot share a process (checkers/remote.py)."""
    monkeypatch.setenv(REMOTE_ENV, "sc://127.0.0.1:1")  # would fail if it were tried
    monkeypatch.delenv(LOCAL_HERE_ENV, raising=False)
    assert get_spark() is spark
