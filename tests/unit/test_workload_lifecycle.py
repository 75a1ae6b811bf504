"""The lifecycle every workload shares, driven with fake clients (no Kafka)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.workloads.lifecycle import HURRIED_FLUSH_S, Lifecycle, rate_verdict
from kafka_chaos.workloads.progress import Progress


class FakeClient:
    def __init__(self, events: list[str], name: str, process: int, stops: bool = True) -> None:
        self.events, self.name, self.process, self.stops = events, name, process, stops
        self.flush_timeout_s = 20.0
        self.crashes: list[str] = []

    def start(self) -> None:
        self.events.append(f"start {self.name}")

    def join(self, timeout: float) -> bool:
        self.events.append(f"join {self.name}")
        return self.stops

    def request_crash(self, reason: str) -> None:
        self.crashes.append(reason)


@dataclass
class FakeSummary:
    done: int
    rate_shortfall: bool = False

    def progress(self) -> Progress:
        return Progress(self.done, self.done, 0, 0, 3, 4, 0, 10.0)


class FakeWorkload(Lifecycle[FakeSummary]):
    unit = "ops"
    slot_kind = "fake slot"
    failover = "fake failover"

    def build_clients(self) -> None:
        self.events: list[str] = []
        self.stuck: list[str] = []
        self.senders = [FakeClient(self.events, "sender", 7, stops=False)]
        self.slots = [FakeClient(self.events, f"slot{i}", 10 + i) for i in range(3)]

    def prepare(self) -> None:
        self.events.append(f"prepare (clock {self._started})")

    def slot_bound(self, hurry: bool) -> float:
        return 0.0

    def summary(self, stuck: list[str] | None = None) -> FakeSummary:
        self.stuck = stuck or []
        return FakeSummary(done=5)


@pytest.fixture
def workload(tmp_path: Path):
    spec = TestSpec(name="t", seed=3)
    spec.consumer.crash_interval_s = 0.05
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        yield FakeWorkload(spec, "fake:9092", history, tmp_path, live=False, probe=lambda: (1, []))


def test_start_prepares_before_the_clock_and_starts_slots_before_senders(workload):
    workload.start()
    try:
        assert workload.events[:5] == [
            "prepare (clock 0.0)", "start slot0", "start slot1", "start slot2", "start sender",
        ]  # fmt: skip
    finally:
        workload.stop()


def test_stop_hurries_the_flush_joins_senders_first_and_names_who_is_stuck(workload, caplog):
    caplog.set_level(logging.INFO, logger=__name__)
    workload.start()
    workload.events.clear()
    summary = workload.stop(hurry=True)
    assert workload.senders[0].flush_timeout_s == HURRIED_FLUSH_S
    assert workload.events == ["join sender", "join slot0", "join slot1", "join slot2"]
    assert workload.stuck == ["producer 7"]
    assert summary == FakeSummary(done=5)
    assert [r.getMessage() for r in caplog.records if r.name == __name__] == [
        "workload: FakeSummary(done=5, rate_shortfall=False)"
    ]


def test_the_crash_schedule_is_seeded_and_names_the_failover(workload):
    workload.start()
    deadline = time.monotonic() + 10
    while sum(len(s.crashes) for s in workload.slots) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    workload.stop()
    crashes = [r for s in workload.slots for r in s.crashes]
    assert len(crashes) >= 5
    assert set(crashes) == {"fake failover: scheduled crash every 0.05s"}
    assert not any(t.name == "crasher" and t.is_alive() for t in threading.enumerate())


def test_snapshot_counts_in_the_workload_unit(workload):
    line = workload._snapshot().line()
    assert line.startswith("t=") and " ops=5 ok=5 " in line and "target 10" in line


def test_rate_verdict_states_the_unit():
    assert rate_verdict(10, 9.5, "txns") == (False, "achieved 10 txns/s (95% of the 10/s target)")
    assert rate_verdict(0, 3) == (False, "achieved 3 sends/s (no target: unlimited)")
