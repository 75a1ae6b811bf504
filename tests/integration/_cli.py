"""Running the real CLI as a subprocess, and reading what it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kafka_chaos.harness.cluster import Cluster

RUN_TIMEOUT_S = 600


def kafka_chaos(*args: str, timeout: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafka_chaos.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_args(cluster: Cluster, store: Path, *extra: str) -> list[str]:
    return ["run", "--cluster-name", cluster.name, "--store", str(store), *extra]


def report_path(stdout: str) -> Path:
    lines = [line for line in stdout.splitlines() if line.startswith("report: ")]
    assert lines, f"no report path printed:\n{stdout}"
    return Path(lines[-1].removeprefix("report: "))


def ops(history: Path) -> list[dict]:
    return [json.loads(line) for line in history.read_text().splitlines()]


def write_ops(history: Path, rows: list[dict]) -> None:
    history.write_text("".join(json.dumps(op) + "\n" for op in rows))


# A short fault-free run, on each client (conftest.py's clean_runs, ``--client both``), so
# their histories compare line for line (test_java_client.py).
CLEAN_RUN_ARGS = ("--time-limit", "12", "--faults", "none", "--rate", "300")


def clean_runs_of(cluster: Cluster, store: Path, name: str) -> tuple[dict[str, Path], str]:
    """``--client both`` CLEAN_RUN_ARGS runs named ``name``, asserted to exit 0: each
    client's run directory, and what the command printed."""
    proc = kafka_chaos(*run_args(cluster, store, "--name", name, "--client", "both",
                                 *CLEAN_RUN_ARGS))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return runs_by_client(proc.stdout), proc.stdout


def runs_by_client(stdout: str) -> dict[str, Path]:
    """A ``--client both`` run's two run directories, by client, from what it printed."""
    runs = {}
    for line in stdout.splitlines():
        if line.startswith("report: "):
            run = Path(line.removeprefix("report: ")).parent
            runs[json.loads((run / "config.json").read_text())["producer"]["client"]] = run
    assert set(runs) == {"librdkafka", "java"}, stdout
    return runs


# Keys a line carries when something happened during it, whichever client wrote it: a
# transaction's ``rebalanced`` (a rebalance during it), ``stalled_s`` (a stall drawn), and
# a rebalance's ``closed`` (a close() that landed mid-rebalance left partitions unrevoked,
# consumer.Ownership; the CI run of 118c01f saw it on librdkafka's side only).
BY_TIMING = frozenset({"rebalanced", "stalled_s", "closed"})
# Lines whose presence alone depends on timing, in the shape both clients write them:
# a send whose outcome the client never learned (it timed out on a loaded machine).
BY_TIMING_LINES = frozenset({("send", "info", ("error", "key", "topic", "value"))})


def shapes(history: Path) -> set[tuple]:
    """Every line's (f, type) and the keys of its value (and of a poll's records), the
    keys and lines that depend on timing alone left out: two clients' histories of one
    scenario must have the same shapes."""
    out = set()
    for op in ops(history):
        value = op.get("value")
        keys = (
            tuple(sorted(set(value) - BY_TIMING)) if isinstance(value, dict)
            else type(value).__name__
        )  # fmt: skip
        if (op["f"], op["type"], keys) in BY_TIMING_LINES:
            continue
        out.add((op["f"], op["type"], keys))
        if isinstance(value, dict):
            for record in value.get("records", [])[:1]:
                out.add((op["f"], op["type"], "record", tuple(sorted(record))))
    return out
