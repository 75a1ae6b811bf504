"""The transactional workload end to end on the shared cluster, through the CLI.

Four real runs: commits, aborts and client crashes on a healthy cluster, once
per client (librdkafka, and Kafka's Java client on KIP-890 part 2);
the transaction coordinator's broker killed mid-run; and consume-transform-
produce with offsets committed inside transactions.  Each must be judged
valid, and each asserts that the history really exercised what it claims
(aborts, rewinds, crashes, a resolved coordinator), so a run that silently
did nothing cannot pass.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
from _cli import kafka_chaos, ops, report_path, run_args, runs_by_client, shapes
from kafka_chaos.checkers.catalog import names
from kafka_chaos.checkers.txn.cycle_checks import CYCLE_CHECKS
from kafka_chaos.harness.cluster import Cluster

pytestmark = pytest.mark.integration

# Every transactional check must have run, beside the queue checks over
# the transactional rows (committed sends are acks).
CHECKS = ("lost-write", "unseen", "duplicate", "poll-skip", *names("txn")[:-1])  # not ctp


def _run(cluster: Cluster, store: Path, *extra: str) -> Path:
    proc = kafka_chaos(*run_args(cluster, store, "--workload", "txn", *extra))
    assert proc.returncode in (0, 1, 2), proc.stdout + proc.stderr
    return report_path(proc.stdout).parent


def _txns(history: list[dict]) -> collections.Counter:
    return collections.Counter(o["type"] for o in history if o["f"] == "txn")


def _valid(run: Path, *more: str) -> dict:
    results = json.loads((run / "results.json").read_text())
    bad = {k: v for k, v in results["checks"].items() if v["valid"] is not True}
    assert results["verdict"] == "valid", (results["unknown_reasons"], bad)
    for name in CHECKS + more:
        assert name in results["checks"], f"{name} did not run"
    return results


@pytest.fixture(scope="module")
def clean_txn_runs(kafka_cluster: Cluster, tmp_path_factory) -> dict[str, Path]:
    """The clean transactional run once per client (``--client both``): librdkafka's
    old transaction protocol and the Java client's KIP-890 part 2, one schedule."""
    proc = kafka_chaos(*run_args(
        kafka_cluster, tmp_path_factory.mktemp("txn-clean"), "--workload", "txn",
        "--client", "both",
        "--time-limit", "20",
        "--faults", "none",
        "--abort-probability", "0.2",
        "--consumer-crash-interval", "8",
        "--seed", "11",
    ))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return runs_by_client(proc.stdout)


@pytest.fixture(scope="module", params=["librdkafka", "java"])
def clean_txn_run(clean_txn_runs: dict[str, Path], request) -> Path:
    """Each client's clean run: every assertion below holds for both."""
    return clean_txn_runs[request.param]


def test_commits_aborts_and_a_client_crash_are_valid(clean_txn_run: Path) -> None:
    results = _valid(clean_txn_run, *CYCLE_CHECKS)
    # The cycle search ran (Elle resolved, every cyclic part named) and the
    # report shows it; G0/G1c are allowed with ww edges, so any count is valid.
    assert results["cycles"]["elle"] == "ok", results["cycles"]
    assert "Dependency cycles (Elle)" in (clean_txn_run / "report.html").read_text()
    history = ops(clean_txn_run / "history.jsonl")
    kinds = _txns(history)
    assert kinds["ok"] > 50 and kinds["fail"] > 5, kinds
    assert any(o["f"] == "crash" for o in history), "no client crash was exercised"
    assert any(o["f"] == "seek" for o in history), "no rewind after an abort"
    committed = [
        m
        for o in history
        if o["f"] == "txn" and o["type"] == "ok"
        for m in o["value"]["ops"]
        if m["f"] == "send"
    ]
    assert committed and all(isinstance(m["offset"], int) for m in committed)


def test_a_txn_run_records_the_clusters_transaction_version(clean_txn_run: Path) -> None:
    """The Java client commits by KIP-890 part 2 only where the cluster finalized
    transaction.version 2 (4.4.0 does); librdkafka never does. The record and the
    report say which (docs/java-client.md)."""
    config = json.loads((clean_txn_run / "config.json").read_text())
    assert config["cluster_features"]["transaction.version"] == "2"
    assert "metadata.version" in config["cluster_features"]
    assert "; transaction.version 2" in (clean_txn_run / "report.html").read_text()


def test_both_clients_write_transactions_alike(clean_txn_runs: dict[str, Path]) -> None:
    java, librdkafka = (shapes(clean_txn_runs[c] / "history.jsonl") for c in ("java", "librdkafka"))
    assert any(s[0] == "txn" for s in java)
    assert java == librdkafka, java ^ librdkafka


def test_members_give_up_their_partitions_when_the_run_stops(clean_txn_run: Path) -> None:
    """A member closed at the end of the run records its revocation; otherwise
    its ownership would run on through the drain and overlap a successor's
    (a false group-double-ownership on a slow machine)."""
    owned: dict[int, set] = collections.defaultdict(set)
    for o in ops(clean_txn_run / "history.jsonl"):
        v = o["value"] if isinstance(o["value"], dict) else {}
        if o["f"] == "rebalance":
            gone = {tuple(x) for x in v["revoked"]}
            owned[o["process"]] = (owned[o["process"]] - gone) | {tuple(x) for x in v["assigned"]}
        elif o["f"] == "crash":
            owned[o["process"]] = set()
    assert not {p: tps for p, tps in owned.items() if tps}


def test_without_ww_edges_a_clean_run_has_no_g1c(clean_txn_runs: dict[str, Path]) -> None:
    """With ww edges a healthy run legally shows G1c (docs/results.md); from reads
    alone (--no-ww-deps, where G1c is an error) it must show none."""
    clean_txn_run = clean_txn_runs["librdkafka"]  # a second check of one history is enough
    proc = kafka_chaos(
        "check", str(clean_txn_run / "history.jsonl"),
        "--config", str(clean_txn_run / "config.json"), "--no-ww-deps", "--json",
    )  # fmt: skip
    assert proc.returncode in (0, 1, 2), proc.stderr[-2000:]
    results = json.loads(proc.stdout)
    assert results["cycles"]["ww_deps"] is False and results["cycles"]["elle"] == "ok"
    found = {n: results["checks"][n]["count"] for n in CYCLE_CHECKS}
    assert not any(found.values()), (found, results["checks"]["G1c"]["examples"][:1])
    assert results["verdict"] == "valid", results["unknown_reasons"]


def test_a_transaction_left_open_by_a_crash_has_no_completion(clean_txn_run: Path) -> None:
    history = ops(clean_txn_run / "history.jsonl")
    open_txn: dict[int, dict] = {}
    left_open = 0
    for o in history:
        if o["f"] == "txn":
            if o["type"] == "invoke":
                open_txn[o["process"]] = o
            else:
                open_txn.pop(o["process"])
        elif o["f"] == "crash" and open_txn.pop(o["process"], None) is not None:
            left_open += 1
    assert left_open >= 1, "a crash between micro-ops should leave its transaction open"


def test_killing_the_coordinators_broker_stays_valid(
    kafka_cluster: Cluster, tmp_path_factory
) -> None:
    run = _run(
        kafka_cluster,
        tmp_path_factory.mktemp("txn-kill"),
        "--time-limit", "30",
        "--faults", "kill",
        "--targets", "coordinator",
        "--fault-interval", "6",
        "--fault-duration", "6",
        "--seed", "12",
    )  # fmt: skip
    _valid(run)
    history = ops(run / "history.jsonl")
    starts = [o for o in history if o["process"] == "nemesis" and o["value"]["phase"] == "start"]
    assert starts and all("error" not in o["value"] for o in starts), starts
    assert all(o["value"]["resolved"]["transactional_id"].endswith("-tx0") for o in starts)
    assert _txns(history)["ok"] > 20


def test_consume_transform_produce_is_exactly_once(
    kafka_cluster: Cluster, tmp_path_factory
) -> None:
    run = _run(
        kafka_cluster,
        tmp_path_factory.mktemp("txn-ctp"),
        "--txn-mode", "ctp",
        "--time-limit", "25",
        "--rate", "50",
        "--faults", "none",
        "--abort-probability", "0.2",
        "--seed", "13",
    )  # fmt: skip
    _valid(run, "exactly-once")
    history = ops(run / "history.jsonl")
    copied = [
        m
        for o in history
        if o["f"] == "txn" and o["type"] == "ok"
        for m in o["value"]["ops"]
        if m["f"] == "send"
    ]
    assert len(copied) > 200 and all("source" in m for m in copied)
    assert any("offsets" in o["value"] for o in history if o["f"] == "txn" and o["type"] == "ok")
