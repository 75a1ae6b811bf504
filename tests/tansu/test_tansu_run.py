"""``kafka-chaos run --broker tansu``: the queue workload under broker kills gives a
report with a verdict, and PostgreSQL's rows are read back beside the acks
(the opt-in tier, ``./test.sh --tansu``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from _tansu_cluster import fresh_cluster  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root")

NAME = os.environ.get("KC_TEST_CLUSTER", "kt1")


@pytest.fixture(scope="module")
def cluster() -> object:
    yield from fresh_cluster(NAME)


def _brokers() -> list[str]:
    from kafka_chaos.harness.backends import load_cluster

    return load_cluster(NAME).bootstrap_servers().split(",")


def _run(store: Path, *more: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kafka-chaos", "run", "--broker", "tansu", "--cluster-name", NAME,
         "--store", str(store), *more],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_a_run_under_broker_kills_has_a_verdict_and_the_storage_read_back(
    cluster: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    done = _run(tmp_path, "--time-limit", "60")
    print(f"run --broker tansu --time-limit 60: {time.monotonic() - started:.0f} s")
    assert done.returncode in (0, 1, 2), done.stdout + done.stderr
    (run,) = list((tmp_path / "queue").glob("2*"))
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"] in ("valid", "invalid", "unknown")
    assert f"verdict: {results['verdict']}" in done.stdout
    assert (run / "report.html").is_file()
    config = json.loads((run / "config.json").read_text())
    assert config["cluster"]["broker"] == "tansu" and config["versions"]["tansu"] == "0.6.0"
    schedule = json.loads((run / "schedule.json").read_text())
    assert {op["f"] for op in schedule["ops"]} == {"kill"}  # Tansu's default faults
    assert all(op["targets"][0] in ("n1", "n2", "n3") for op in schedule["ops"])  # never n4
    stored = json.loads((run / "storage-evidence.json").read_text())
    assert stored["acknowledged"] == results["summary"]["acked"]
    print(json.dumps({k: v for k, v in stored.items() if k != "examples"}))
    assert (run / "logs" / "n4" / "logs" / "postgres.out").is_file()
    assert (run / "logs" / "n1" / "logs" / "tansu.out").is_file()


def test_what_tansu_lacks_or_cannot_take_is_one_line_before_the_run(
    cluster: str, tmp_path: Path
) -> None:
    txn = _run(tmp_path, "--workload", "txn", "--time-limit", "10", timeout=300)
    assert txn.returncode == 3 and "Traceback" not in txn.stderr
    said = [line for line in txn.stderr.splitlines() if line.startswith("kafka-chaos: error")]
    assert len(said) == 1, txn.stderr  # after the run's own log lines, the refusal is one line
    # The broker named is whichever answered: every Tansu broker is node 111 at its own address.
    assert re.fullmatch(
        "kafka-chaos: error: the txn workload with these settings needs transactions, and the "
        rf"broker at ({'|'.join(map(re.escape, _brokers()))}) does not support EndTxn "
        r"\(its ApiVersions answer\)",
        said[0],
    ), said[0]
    corrupt = _run(tmp_path, "--faults", "corrupt-segment", timeout=120)
    assert corrupt.returncode == 3
    assert corrupt.stderr == (
        "kafka-chaos: error: corrupt-segment does not apply to tansu: "
        "Tansu's records are PostgreSQL rows, not log segments\n"
    )
