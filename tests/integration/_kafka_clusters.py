"""Integration clusters for tests: create, claim, and always tear down.

A module of its own (not conftest.py) so test files can import it: several
conftest modules in one session would shadow each other's names.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from kafka_chaos.harness import kafka_db
from kafka_chaos.harness.backends import create_cluster, destroy_cluster, load_cluster
from kafka_chaos.harness.cluster import Cluster, cluster_dir
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.spec import ClusterSpec

log = logging.getLogger(__name__)

# KC_TEST_CLUSTER lets engineers working side by side keep their sessions apart.
# Under pytest-xdist every worker but gw0 adds its id (``./test.sh`` splits
# the cluster tests over two workers: tests/_xdist_order.py): the names differ
# before any cluster is made, so two workers never race to claim one.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
SHARED_CLUSTER = os.environ.get("KC_TEST_CLUSTER", "kc-test") + (
    "" if _WORKER == "gw0" else f"-{_WORKER}"
)
START_TIMEOUT_S = 180.0


def destroy_quietly(name: str) -> None:
    """Stop Kafka (by pid file) and remove the cluster and its disaster-recovery pair
    (``harness.mirror_pair``), if a mirror test made one; never raises."""
    from kafka_chaos.harness import mirror_pair

    try:
        mirror_pair.destroy(name)
    except HarnessError as e:
        log.warning("destroying the mirror pair of %s: %s", name, e)
    with contextlib.suppress(HarnessError):
        cluster = load_cluster(name)
        kafka_db.stop_cluster(cluster, timeout_s=3)  # data is thrown away: no long grace
        cluster.close()
    for attempt in (1, 2):  # teardown may race the kernel removing links; retry once
        try:
            destroy_cluster(name)
            return
        except HarnessError as e:
            log.warning("destroying cluster %s (attempt %d): %s", name, attempt, e)


OWNER_FILE = "test-owner"


def _owner_alive(name: str) -> bool:
    """True if another live test session created cluster ``name``.

    Engineers share one machine: a ``kc-test`` whose creator still runs is
    in use, not stale, and must not be torn down under its tests.
    """
    try:
        pid = int((cluster_dir(name) / OWNER_FILE).read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return False
    return pid != os.getpid() and b"python" in cmdline


def _claim(spec: ClusterSpec) -> Cluster:
    """Create ``spec``'s cluster, or a session-private one if the name is in use."""
    if _owner_alive(spec.name):
        spec = replace(spec, name=f"{spec.name}-{os.getpid()}"[:32])
    destroy_quietly(spec.name)  # a leftover of a crashed session
    cluster = create_cluster(spec)
    (cluster.state_dir / OWNER_FILE).write_text(f"{os.getpid()}\n")
    return cluster


@contextlib.contextmanager
def running_cluster(spec: ClusterSpec) -> Iterator[Cluster]:
    """A fresh cluster with Kafka running; destroyed on exit, even on failure."""
    if os.geteuid() != 0:
        pytest.skip("integration clusters need root (local backend)")
    cluster = None
    try:
        cluster = _claim(spec)
        kafka_db.start_cluster(cluster, spec, timeout_s=START_TIMEOUT_S)
        yield cluster
    finally:
        if cluster is not None:  # never tear down a cluster another session created
            destroy_quietly(cluster.name)


@contextlib.contextmanager
def bare_cluster(name: str, nodes: int) -> Iterator[Cluster]:
    """Namespaces and sshd only, no Kafka: for tests of the nodes themselves."""
    destroy_quietly(name)  # a leftover of an earlier, killed session
    cluster = create_cluster(ClusterSpec(name=name, nodes=nodes))
    try:
        yield cluster
    finally:
        cluster.close()
        destroy_quietly(name)
