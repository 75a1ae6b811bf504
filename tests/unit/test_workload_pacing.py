"""The send pacer: absolute schedule, bounded catch-up, unlimited mode."""

from __future__ import annotations

import pytest
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.workloads.producer import Pacer, split_rate


def drive(pacer: Pacer, start: float, duration: float, step: float) -> list[float]:
    """Simulate a loop that checks every ``step`` s and sends whenever due."""
    sends, now = [], start
    while now < start + duration:
        while pacer.delay(now) == 0.0:
            sends.append(now)
            pacer.sent()
        now += step
    return sends


def test_rate_is_kept_on_a_coarse_clock():
    # A loop that only wakes every 7 ms still averages the target rate.
    sends = drive(Pacer(500.0, now=0.0), 0.0, 10.0, 0.007)
    assert abs(len(sends) - 5000) <= 5


def test_delay_until_next_due():
    p = Pacer(100.0, now=10.0)
    assert p.delay(10.0) == 0.0
    p.sent()
    assert p.delay(10.0) == pytest.approx(0.01)
    assert p.delay(10.004) == pytest.approx(0.006)


def test_catch_up_after_a_stall_is_bounded():
    p = Pacer(100.0, max_lag_s=1.0, now=0.0)
    p.delay(0.0)
    # Stalled for 10 s: only 1 s worth (100 sends) may burst out.
    burst = 0
    while p.delay(10.0) == 0.0:
        p.sent()
        burst += 1
    assert 100 <= burst <= 101


def test_unlimited_never_waits():
    p = Pacer(0.0, now=0.0)
    for _ in range(1000):
        assert p.delay(0.0) == 0.0
        p.sent()


def test_split_rate():
    assert split_rate(1000.0, 4) == [250.0] * 4
    assert split_rate(0.0, 2) == [0.0, 0.0]
    with pytest.raises(ConfigError, match="workers"):
        split_rate(1000.0, 0)
