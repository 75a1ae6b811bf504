"""bench/power_loss.py's cells: each is the power-loss-all preset with the cell's settings."""

from __future__ import annotations

import sys
from pathlib import Path

from kafka_chaos.options import build_spec

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import power_loss as bench  # noqa: E402


def test_a_cell_sets_its_flush_rf_targets_and_fault_over_the_preset() -> None:
    cell = bench.Cell("every", 2, "isr", "kill")
    spec = build_spec(bench.cell_layer(cell, 40.0, 5001, "pl"))
    assert spec.cluster.broker_config == {"log.flush.interval.messages": "1"}
    assert (spec.topic.replication_factor, spec.topic.min_insync_replicas) == (2, 2)
    assert (spec.nemesis.faults, spec.nemesis.targets) == (["kill"], "isr")
    assert spec.producer.acks == "all" and not spec.producer.enable_idempotence
    assert spec.producer.rate == build_spec({}).producer.rate  # the preset's pace


def test_rate_lifts_the_producers_pace_and_keeps_the_rest() -> None:
    cell = bench.Cell("default", 3, "minority", "power-loss")
    spec = build_spec(bench.cell_layer(cell, 40.0, 5000, "pl", rate=50_000.0))
    assert spec.producer.rate == 50_000.0
    assert spec.producer.acks == "all" and not spec.producer.enable_idempotence
