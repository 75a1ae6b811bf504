"""Polling for integration tests: wait until the cluster shows what a test expects."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from kafka_chaos.harness import admin

T = TypeVar("T")


def wait_for_history_line(store: Path, name: str, needle: str, timeout_s: float) -> Path:
    """The history of run ``name`` in ``store`` once a line containing ``needle`` is in it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for history in store.glob(f"{name}/*/history.jsonl"):
            if needle in history.read_text():
                return history
        time.sleep(0.5)
    raise AssertionError(f"no {needle} in run {name!r} within {timeout_s}s")


def wait_for(what: str, check: Callable[[], T | None], timeout_s: float) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what``.

    Admin errors count as "not yet": brokers refuse requests while they settle
    after a kill or a partition.
    """
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except admin.AdminError as e:
            last = e
        time.sleep(0.5)
    pytest.fail(f"{what} did not happen within {timeout_s}s (last error: {last})")
