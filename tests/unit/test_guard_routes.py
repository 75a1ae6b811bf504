"""The guard routes both backends share (harness/backends/guard_routes.py), on real routes."""

from __future__ import annotations

import subprocess

from kafka_chaos.harness.backends import guard_routes

PREFIX = "10.251.253.0/24"  # in the local backend's range, past its last slot (250)


def _route_error(address: str) -> str:
    done = subprocess.run(["ip", "route", "get", address], capture_output=True, text=True)
    return done.stderr.strip() if done.returncode else ""


def test_a_guard_is_added_once_removed_once_and_blackholes_its_prefix() -> None:
    assert not guard_routes.present(PREFIX)
    try:
        assert guard_routes.add(PREFIX)
        assert not guard_routes.add(PREFIX)  # idempotent: resumed creation adds nothing
        assert guard_routes.present(PREFIX)
        assert "no route to host" in _route_error("10.251.253.10").lower()
    finally:
        removed = guard_routes.remove(PREFIX)
    assert removed
    assert not guard_routes.remove(PREFIX)  # repeated teardown is a no-op
    assert not guard_routes.present(PREFIX)
