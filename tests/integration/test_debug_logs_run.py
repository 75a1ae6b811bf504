"""``--client-debug`` and ``--broker-debug`` on the shared cluster: one short run.

The librdkafka producers' logs must hold their produce requests and the
idempotent producer's pid and epoch, the consumers' their group protocol; a
broker logger named in ``--broker-debug`` must have written DEBUG lines into
the run's broker logs; and the brokers' log config must be plain again after.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from _cli import kafka_chaos, report_path, run_args
from kafka_chaos.harness import broker_debug
from kafka_chaos.harness.cluster import Cluster

pytestmark = pytest.mark.integration

LOGGER = "org.apache.kafka.coordinator.group"  # offset commits are replayed at DEBUG


def lines(path: Path) -> list[str]:
    with gzip.open(path, "rt") as f:
        return f.read().splitlines()


def test_client_and_broker_debug_logs_are_kept_with_the_run(
    kafka_cluster: Cluster, tmp_path: Path
) -> None:
    proc = kafka_chaos(
        *run_args(kafka_cluster, tmp_path, "--name", "debuglogs", "--time-limit", "10",
                  "--faults", "none", "--rate", "300", "--client-debug",
                  "--broker-debug", LOGGER),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = report_path(proc.stdout).parent
    logs = run / "client-logs"
    summary = json.loads((logs / "summary.json").read_text())
    producers = sorted(logs.glob("debuglogs-p*.log.gz"))
    consumers = sorted(logs.glob("debuglogs-c*.log.gz"))
    assert len(producers) == 2 and len(consumers) == 2, sorted(p.name for p in logs.iterdir())
    for p in producers:
        text = lines(p)
        assert any("Sent ProduceRequest" in x for x in text), p.name
        assert any(" NEWPID " in x and "PID{Id:" in x and "Epoch:" in x for x in text), p.name
        assert summary["clients"][p.name.removesuffix(".log.gz")]["lines"] == len(text)
    for c in consumers:
        assert any(" CGRP" in x for x in lines(c)), c.name
    assert summary["capped_at"] is None

    debug = [
        line
        for log in run.glob("logs/*/logs/server.log*")
        for line in log.read_text(errors="replace").splitlines()
        if "] DEBUG " in line and f"({LOGGER}." in line
    ]
    assert debug, f"no DEBUG line of {LOGGER} in the run's broker logs"
    assert broker_debug.loggers_set(kafka_cluster) == []
    for node in kafka_cluster.nodes:
        config = node.run(f"cat {node.path('config')}/kafka-log.properties", timeout=15)
        assert "logger.debug" not in config.stdout, node.name
