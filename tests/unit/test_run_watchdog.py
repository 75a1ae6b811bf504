"""The end-of-run watchdog: a hung teardown step must not hang the run."""

from __future__ import annotations

import logging
import threading
import time

from harness import run


def test_a_hung_step_is_left_behind_after_its_timeout(caplog):
    release = threading.Event()
    t0 = time.monotonic()
    with caplog.at_level(logging.ERROR):
        run._within(0.5, "heal", release.wait)
    took = time.monotonic() - t0
    release.set()
    assert 0.4 < took < 5
    assert "heal still running" in caplog.text


def test_a_failing_step_is_logged_not_raised(caplog):
    def boom() -> None:
        raise RuntimeError("ssh gone")

    with caplog.at_level(logging.ERROR):
        run._within(5, "heal", boom)
    assert "heal failed" in caplog.text and "ssh gone" in caplog.text
