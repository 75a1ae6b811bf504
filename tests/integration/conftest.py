"""The shared integration cluster: 3 local KRaft nodes of the newest Kafka.

One cluster per session (``kc-test``) keeps CI short: starting Kafka is the
slowest step of most integration tests.  A leftover ``kc-test`` of a crashed
session is destroyed first; the cluster is torn down at session end whatever
happened.  Tests that break it (kill, pause, stop) must call
``kafka_db.recover_cluster(cluster)`` before they return.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

import pytest

from harness import kafka_db
from harness.backends import create_cluster, destroy_cluster, load_cluster
from harness.cluster import Cluster
from harness.errors import HarnessError
from harness.spec import NEWEST_KAFKA, ClusterSpec

log = logging.getLogger(__name__)

# KC_TEST_CLUSTER lets engineers working side by side keep their sessions apart.
SHARED_CLUSTER = os.environ.get("KC_TEST_CLUSTER", "kc-test")
START_TIMEOUT_S = 180.0


def destroy_quietly(name: str) -> None:
    """Stop Kafka (by pid file) and remove the cluster; never raises."""
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


@contextlib.contextmanager
def running_cluster(spec: ClusterSpec) -> Iterator[Cluster]:
    """A fresh cluster with Kafka running; destroyed on exit, even on failure."""
    if os.geteuid() != 0:
        pytest.skip("integration clusters need root (local backend)")
    destroy_quietly(spec.name)
    try:
        cluster = create_cluster(spec)
        kafka_db.start_cluster(cluster, spec, timeout_s=START_TIMEOUT_S)
        yield cluster
    finally:
        destroy_quietly(spec.name)


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[Cluster]:
    """The shared 3-node KRaft cluster on the newest Kafka (``kc-test``)."""
    with running_cluster(
        ClusterSpec(name=SHARED_CLUSTER, nodes=3, kafka_version=NEWEST_KAFKA, mode="kraft")
    ) as cluster:
        yield cluster
