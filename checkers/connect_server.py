"""A Spark Connect server the harness starts and stops, by pid file, never by name.

Why: one warm engine for many checks (a suite, a shrink, a version grid, the
test session).  The server is ``spark-submit`` of Spark's own
``SparkConnectServer`` class from the pyspark install, with the settings a
local check session gets (checkers/session.py), bound to 127.0.0.1 on a free
port.

It must never outlive its owner.  ``stop`` ends it (callers do so in
``finally`` and at exit); for an owner that was SIGKILLed, each server has a
record under ``<KAFKA_CHAOS_HOME>/spark-connect/``: its pid and start time,
and its owner's.  ``reap`` (run before every start, and by ``cluster down``)
stops a server only when its owner is gone and its command line still
carries the record's path (``MARK``), so a reused pid is never signalled.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pyspark
from kafka_chaos.checkers import remote, session
from kafka_chaos.harness.backends import procs
from kafka_chaos.harness.cluster import home
from kafka_chaos.harness.errors import HarnessError

log = logging.getLogger(__name__)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
MARK = "spark.kafka_chaos.engine_record"  # a setting on the command line: the record's path
START_TIMEOUT_S = 180.0  # a JVM start, slow when the machine is loaded (12 s idle here)
STOP_GRACE_S = 15.0


def records_dir() -> Path:
    return home() / "spark-connect"


@dataclass(frozen=True)
class Server:
    """A server this process started."""

    pid: int
    port: int
    record: Path
    log_file: Path

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _command(port: int, record: Path, expected_ops: int) -> list[str]:
    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    conf = {
        **session.settings(expected_ops),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        MARK: str(record),
    }
    args = [str(spark_submit), "--class", SERVER_CLASS, "--name", "kafka-chaos engine"]
    args += ["--master", session.DEFAULT_MASTER]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return args


def start(expected_ops: int = 0, timeout_s: float = START_TIMEOUT_S) -> Server:
    """Start a server and return once it accepts connections; HarnessError if it cannot."""
    reap()
    directory = records_dir()
    directory.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    record = directory / f"{os.getpid()}-{port}.json"
    log_file = directory / f"{os.getpid()}-{port}.log"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(directory)}
    with log_file.open("wb") as out:
        proc = subprocess.Popen(
            _command(port, record, expected_ops),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # a terminal's Ctrl-C is the owner's to act on
        )
    mine = {"pid": proc.pid, "start": procs.start_time(proc.pid), "port": port}
    owner = {"owner": os.getpid(), "owner_start": procs.start_time(os.getpid())}
    record.write_text(json.dumps({**mine, **owner}) + "\n")
    server = Server(proc.pid, port, record, log_file)
    began = time.monotonic()
    while not _accepts(port):
        if proc.poll() is not None or time.monotonic() - began > timeout_s:
            stop(server)
            tail = log_file.read_text(errors="replace").strip().splitlines()[-1:]
            raise HarnessError(
                f"Spark Connect server did not start within {timeout_s:g} s "
                f"({'; '.join(tail) or 'no output'}; log: {log_file})"
            )
        time.sleep(0.2)
    log.info(
        "engine start: Spark Connect server pid %d at %s in %.1f s",
        proc.pid,
        server.url,
        time.monotonic() - began,
    )
    return server


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _ours(pid: int, record: Path) -> bool:
    """``pid`` runs with ``record``'s path in its command line: the server we started."""
    args = procs.cmdline(pid)
    return args is not None and f"{MARK}={record}" in args and procs.alive(pid)


def stop(server: Server) -> None:
    """End ``server`` (SIGTERM, SIGKILL after a grace) and remove its record and log;
    this process's session on it is closed first (``remote.detach``)."""
    remote.detach(server.url)
    if _ours(server.pid, server.record):
        procs.terminate([server.pid], grace_s=STOP_GRACE_S)
        log.info("engine stop: Spark Connect server pid %d", server.pid)
    _reap_child(server.pid)
    server.record.unlink(missing_ok=True)
    if not procs.alive(server.pid):
        server.log_file.unlink(missing_ok=True)


def _reap_child(pid: int) -> None:
    """Collect the exit status of our own child, so no zombie stays in the table."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def reap() -> list[int]:
    """Stop servers whose owner is gone (SIGKILLed, say); returns the pids stopped.

    A record whose server is gone is removed; a server whose owner still
    runs is left alone (a suite in another terminal uses it).
    """
    stopped = []
    for record in sorted(records_dir().glob("*.json")) if records_dir().is_dir() else []:
        try:
            data = json.loads(record.read_text())
            pid, owner, owner_start = int(data["pid"]), int(data["owner"]), data["owner_start"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if procs.alive(owner) and procs.start_time(owner) == owner_start:
            continue
        if _ours(pid, record):
            procs.terminate([pid], grace_s=STOP_GRACE_S)
            log.warning("stopped Spark Connect server pid %d left by pid %d", pid, owner)
            stopped.append(pid)
        record.unlink(missing_ok=True)
        record.with_suffix(".log").unlink(missing_ok=True)
    return stopped
