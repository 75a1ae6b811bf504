"""Blackhole routes that keep test-node addresses on this machine.

A node's subnet is reached through a bridge the harness makes (the local
backend's, or a libvirt network's).  While that bridge is missing (before it
is made, after it is removed, or after a crash in between) a packet for a
node address would follow the default route off this machine.  An
``unreachable`` route for the subnet, with a metric worse than any bridge's
route, turns such packets into an immediate error instead.  Both backends
add and remove these routes here, idempotently, so teardown can be repeated.
"""

from __future__ import annotations

from kafka_chaos.harness.backends.hostcmd import host_run

METRIC = "4000"  # worse than a bridge's own route (metric 0): it wins only when that is gone


def present(prefix: str) -> bool:
    """Whether the guard for exactly ``prefix`` (``10.251.3.0/24``) is in the main table."""
    out = host_run(["ip", "route", "show", "table", "main", "exact", prefix]).stdout
    return any(line.startswith("unreachable") for line in out.splitlines())


def add(prefix: str) -> bool:
    """Add the guard for ``prefix``; False if it was already there."""
    if present(prefix):
        return False
    host_run(["ip", "route", "add", "unreachable", prefix, "metric", METRIC])
    return True


def remove(prefix: str) -> bool:
    """Remove the guard for ``prefix``; False if it was not there."""
    if not present(prefix):
        return False
    host_run(["ip", "route", "del", "unreachable", prefix, "metric", METRIC])
    return True
