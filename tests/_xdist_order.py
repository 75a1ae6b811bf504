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

By default (``two_cluster_units``; KC_TEST_CLUSTER_UNITS=1 turns it off) the cluster
tests are two units, each on a cluster of its own (a worker's shared cluster
is named after it, ``kc-test-gw1``: tests/integration/_kafka_clusters.py).
A cluster test mostly waits: on its workload's time limit, on a broker
starting, on a check whose Spark keeps a third of the two cores busy, so two
of them side by side take little more wall time than one.  The split is by
module and fixed (every worker must compute the same units): the modules
that share the session's fault-free runs (``clean_runs``), or a fixed cluster
name ("a2"), stay in the first unit; the second holds the mirror, share-group
and transactional modules and the disk faults, about half of the seconds.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

# Tiers whose tests share one real cluster and the machine-wide state around
# it (the nodes' namespaces, iptables rules, the cluster directory).
ON_A_CLUSTER = ("integration", "vagrant")  # the browser tests render reports only
# The integration modules of the second cluster unit (see above).
SECOND_CLUSTER = frozenset(
    {
        "test_mirror.py",
        "test_mirror_teardown.py",
        "test_share_groups.py",
        "test_share_probe.py",
        "test_txn_workload.py",
        "test_drain_open_transaction.py",
        "test_debug_logs_run.py",
        "test_power_loss_run.py",
        "test_disk_faults_run.py",
    }
)
CLUSTER_UNITS = ("cluster", "cluster-2")


def scope_of(nodeid: str) -> str:
    """The unit of work a worker gets whole: one of the two cluster units, else the module."""
    path = nodeid.split("::", 1)[0]
    parts = Path(path).relative_to("tests").parts if path.startswith("tests/") else ()
    if not parts or parts[0] not in ON_A_CLUSTER:
        return path
    second = parts[0] == "integration" and parts[-1] in SECOND_CLUSTER
    return "cluster-2" if second and two_cluster_units() else "cluster"


def two_cluster_units() -> bool:
    """The default (KC_TEST_CLUSTER_UNITS=1 turns it off): clean-clone rehearsals took
    25.5 and 26 min instead of about 38. Each then failed one test whose assertion
    depended on timing under the extra load (a send that timed out, a share member
    that joined after a 12 s run); both tests now allow for it (0730edc, 9023fe4)."""
    return os.environ.get("KC_TEST_CLUSTER_UNITS", "2") == "2"


def longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with whole scopes reordered: the cluster's first, then by Spark tests, most first.

    Deterministic (every worker must collect the same list) and stable.
    """
    spark = Counter(scope_of(i.nodeid) for i in items if "spark" in getattr(i, "fixturenames", ()))

    def key(item: pytest.Item) -> tuple[bool, int]:
        scope = scope_of(item.nodeid)
        return (scope not in CLUSTER_UNITS, -spark[scope])

    return sorted(items, key=key)


def make_scheduler(config: pytest.Config, log):
    """LoadScope over ``scope_of``, in collection order (which ``longest_first`` set)."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # keep our order, not xdist's count order

    class ClusterTestsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ClusterTestsTogether(config, log)
