"""The progress display: log lines without a TTY, a rich table with one."""

from __future__ import annotations

import io
import logging
import time

from kafka_chaos.workloads.progress import Progress, ProgressDisplay, RateMeter, Snapshot, _table
from rich.console import Console


def snap(**changes) -> Snapshot:
    counts = dict(
        done=12000, ok=11000, fail=3, info=7, polls=40, records=10990, crashes=1,
        target_rate=1000.0,
    )  # fmt: skip
    shown = dict(elapsed_s=12.0, rate=600.0, fault="partition n2")
    for key, value in changes.items():
        (counts if key in counts else shown)[key] = value
    return Snapshot(counts=Progress(**counts), **shown)


def test_log_mode_emits_one_line_summaries(caplog):
    calls = []

    def snapshot() -> Snapshot:
        calls.append(1)
        return snap()

    caplog.set_level(logging.INFO, logger="kafka_chaos.workloads.progress")
    display = ProgressDisplay(snapshot, interval_s=0.05, live=False)
    display.start()
    time.sleep(0.3)
    display.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka_chaos.workloads.progress"]
    assert lines and calls
    assert "ok=11000" in lines[0] and "fail=3" in lines[0] and "fault=partition n2" in lines[0]
    assert "target 1000" in lines[0]


def test_table_shows_counts_shortfall_and_fault():
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(_table(snap()))
    text = out.getvalue()
    for expected in ("11000", "sends failed", "3", "600/s", "1000/s", "partition n2", "40 / 10990"):
        assert expected in text
    assert "unlimited" in snap(target_rate=0).line()


def test_rate_meter():
    meter = RateMeter()
    time.sleep(0.05)
    assert meter.rate(100) > 0
    assert meter.rate(100) == 0.0
