"""Which order pytest-xdist hands out test modules in (``./test.sh`` runs two workers).

The suite's wall time is that of its slowest worker.  xdist's LoadScope hands
out modules largest first by number of tests, which says little about time: a
module of 136 sub-millisecond cases went before the cluster tests (the full
tier's critical path), and modules of three or four tests that each judge
histories with Spark, minutes each on a loaded machine, came last and ran
alone while the other worker idled.  Longest first keeps the two workers'
ends close, so: the cluster tests first, then the unit modules by how many of
their tests use the ``spark`` fixture (a proxy for their time that needs no
timing database), then the rest in collection order.  Within a module the
order is kept: some property tests read what an earlier test collected.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

# Tiers whose tests share one real cluster and the machine-wide state around
# it (the nodes' namespaces, iptables rules, the cluster directory).
ON_A_CLUSTER = ("integration", "vagrant")  # the browser tests render reports only


def scope_of(nodeid: str) -> str:
    """The unit of work a worker gets whole: every cluster test together, else the module."""
    path = nodeid.split("::", 1)[0]
    tier = Path(path).relative_to("tests").parts[0] if path.startswith("tests/") else ""
    return "cluster" if tier in ON_A_CLUSTER else path


def longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with whole scopes reordered: the cluster's first, then by Spark tests, most first.

    Deterministic (every worker must collect the same list) and stable.
    """
    spark = Counter(scope_of(i.nodeid) for i in items if "spark" in getattr(i, "fixturenames", ()))

    def key(item: pytest.Item) -> tuple[bool, int]:
        scope = scope_of(item.nodeid)
        return (scope != "cluster", -spark[scope])

    return sorted(items, key=key)


def make_scheduler(config: pytest.Config, log):
    """LoadScope over ``scope_of``, in collection order (which ``longest_first`` set)."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # keep our order, not xdist's count order

    class ClusterTestsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ClusterTestsTogether(config, log)
