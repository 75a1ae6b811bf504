"""The shared integration cluster: 3 local KRaft nodes of the newest Kafka.

One cluster per session (``kc-test``) keeps CI short: starting Kafka is the
slowest step of most integration tests.  A leftover ``kc-test`` of a crashed
session is destroyed first, but one whose creating session still runs is
left alone and this session uses ``kc-test-<pid>`` instead; the cluster is
torn down at session end whatever happened.  Tests that break it (kill,
pause, stop) must call ``kafka_db.recover_cluster(cluster)`` before they
return.  The machinery lives in ``_kafka_clusters`` (importable by tests).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _cli import clean_runs_of
from _kafka_clusters import SHARED_CLUSTER, running_cluster
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.spec import NEWEST_KAFKA, ClusterSpec


@pytest.fixture(scope="session", autouse=True)
def warm_engine() -> Iterator[str | None]:
    """One Spark Connect server for every check the cluster tests run (issue 46).

    The ``kafka-chaos`` commands they run as subprocesses inherit its URL
    (``KC_SPARK_REMOTE``) and attach to it instead of each starting a Spark;
    this process keeps a local session for the unit tests that share it (a
    process is either local or connected: checkers/remote.py).  Stopped at
    the session's end (kafka_chaos/engine.py).
    """
    from kafka_chaos.engine import shared_engine

    with shared_engine(children_only=True) as url:
        yield url


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[Cluster]:
    """The shared 3-node KRaft cluster on the newest Kafka (``kc-test``)."""
    with running_cluster(
        ClusterSpec(name=SHARED_CLUSTER, nodes=3, kafka_version=NEWEST_KAFKA, mode="kraft")
    ) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def clean_runs(kafka_cluster: Cluster, tmp_path_factory) -> tuple[dict[str, Path], str]:
    """One fault-free run per client (``--client both``): each client's run directory,
    and the command's output."""
    return clean_runs_of(kafka_cluster, tmp_path_factory.mktemp("store"), "clean")


@pytest.fixture(scope="session")
def clean_run(clean_runs) -> Path:
    """The fault-free librdkafka run, shared by the tests that derive histories from
    it and by those that compare another client's history with it."""
    return clean_runs[0]["librdkafka"]
