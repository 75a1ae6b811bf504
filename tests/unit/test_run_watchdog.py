"""The end of the workload phase: heal and stop together, each bounded."""

from __future__ import annotations

import logging
import threading
import time

from kafka_chaos import run


class Nemesis:
    def __init__(self, heal=None) -> None:
        self.healing = threading.Event()
        self._heal = heal or (lambda: None)
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True

    def heal_all(self) -> None:
        self.healing.set()
        self._heal()


class Workload:
    def __init__(self, nemesis: Nemesis) -> None:
        self.nemesis = nemesis
        self.hurry: bool | None = None
        self.saw_heal_running = False

    def stop(self, hurry: bool = False) -> str:
        self.hurry = hurry
        self.saw_heal_running = self.nemesis.healing.wait(5)
        return "summary"


def test_a_hung_heal_is_left_behind_and_the_workload_still_stops(caplog, monkeypatch):
    monkeypatch.setattr(run, "HEAL_WATCHDOG_S", 0.5)
    release = threading.Event()
    nemesis = Nemesis(heal=release.wait)
    workload = Workload(nemesis)
    t0 = time.monotonic()
    with caplog.at_level(logging.ERROR):
        run._end_phase(nemesis, workload, hurry=False)
    took = time.monotonic() - t0
    release.set()
    assert 0.4 < took < 5
    assert workload.hurry is False
    assert "healing still running" in caplog.text


def test_the_heal_runs_beside_the_workloads_stop_not_after_it():
    nemesis = Nemesis()
    workload = Workload(nemesis)
    run._end_phase(nemesis, workload, hurry=True)
    assert workload.saw_heal_running and nemesis.stopped
    assert workload.hurry is True


def test_a_failing_heal_is_logged_not_raised(caplog):
    def boom() -> None:
        raise RuntimeError("ssh gone")

    with caplog.at_level(logging.ERROR):
        nemesis = Nemesis(heal=boom)
        run._end_phase(nemesis, Workload(nemesis), hurry=False)
    assert "heal failed" in caplog.text and "ssh gone" in caplog.text
