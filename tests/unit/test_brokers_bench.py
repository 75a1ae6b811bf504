"""bench/brokers.py: each Tansu scenario's Kafka twin, and the table's counts and rates."""

from __future__ import annotations

import sys
from pathlib import Path

from kafka_chaos.options import build_spec

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import brokers as bench  # noqa: E402


def test_the_twin_keeps_the_broker_faults_and_drops_the_storage_faults() -> None:
    spec = build_spec(bench.cell_layer("tansu-idempotent", "kafka", "kk", 30.0, 1, "4.4.0"))
    assert (spec.cluster.broker, spec.cluster.kafka_version) == ("kafka", "4.4.0")
    assert spec.nemesis.faults == ["kill"]
    assert spec.producer.enable_idempotence is True
    tansu = build_spec(bench.cell_layer("tansu-idempotent", "tansu", "ts", 30.0, 1, "4.4.0"))
    assert tansu.nemesis.faults == ["kill", "storage-kill", "storage-pause"]
    assert (tansu.cluster.name, tansu.time_limit_s) == ("ts", 30.0)


def test_a_scenario_of_storage_faults_alone_has_no_kafka_twin() -> None:
    assert bench.cell_layer("tansu-storage-partition", "kafka", "kk", 30.0, 1, "4.4.0") is None
    text = bench.table([], "4.4.0")
    assert "| tansu-storage-partition | kafka 4.4.0 | n/a |" in text
    assert "| tansu-storage-partition | tansu 0.6.0 | 0 |" in text


def test_a_row_counts_verdicts_loss_and_the_wilson_interval() -> None:
    runs = [
        {"verdict": "valid", "acked": 100, "lost": 0},
        {"verdict": "invalid", "acked": 200, "lost": 7},
        {"verdict": "invalid", "acked": 300, "lost": 0},
        {"verdict": "unknown", "acked": 400, "lost": 0},
        {"verdict": "harness error: cluster gone"},
    ]
    row = bench.cell_row("tansu-storage-partition", "tansu 0.6.0", runs)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:6] == ["5", "1", "2", "2"]
    assert cells[6] == "250"  # the mean of the runs with a count
    assert cells[7] == "7 (1 of 4 runs)"
    # 4 of 5 runs not valid: Wilson 95 % interval 38-96 %
    assert cells[8] == "4 of 5 (80%; 95% interval 38-96%)"


def test_records_are_grouped_by_scenario_and_broker() -> None:
    def run(on: str, verdict: str, acked: int, lost: int) -> dict[str, object]:
        return {
            "scenario": "tansu-broker-kill",
            "broker": on,
            "verdict": verdict,
            "acked": acked,
            "lost": lost,
        }

    records = [
        run("kafka", "valid", 9, 0),
        run("tansu", "valid", 5, 0),
        run("tansu", "invalid", 7, 1),
    ]
    lines = bench.table(records, "4.4.0").splitlines()
    tansu = next(x for x in lines if x.startswith("| tansu-broker-kill | tansu"))
    kafka = next(x for x in lines if x.startswith("| tansu-broker-kill | kafka"))
    assert "| 2 | 1 | 1 | 0 | 6 | 1 (1 of 2 runs) | 1 of 2" in tansu
    assert "| 1 | 1 | 0 | 0 | 9 | 0 (0 of 1 runs) | 0 of 1" in kafka
