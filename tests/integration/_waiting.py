"""Polling for integration tests: wait until the cluster shows what a test expects."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from harness import admin

T = TypeVar("T")


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
