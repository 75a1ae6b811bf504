"""ApiVersions asked of the session's real 4.4.0 brokers, as a run asks before it starts."""

from __future__ import annotations

import pytest

from harness import api_versions, kafka_db
from harness.cluster import Cluster
from harness.errors import HarnessError


def test_every_broker_answers_with_every_capability_the_workloads_use(
    kafka_cluster: Cluster,
) -> None:
    dist = kafka_db.installed_distribution(kafka_cluster)
    brokers = api_versions.ask(dist, kafka_cluster.bootstrap_servers())
    assert sorted(b.address for b in brokers) == sorted(
        f"{n.address}:9092" for n in kafka_cluster.nodes
    )
    assert api_versions.refusal(brokers, list(api_versions.NEEDS), "every workload") is None
    assert all(b.apis["EndTxn"] is not None for b in brokers)


def test_a_port_nobody_listens_on_fails_in_one_line(kafka_cluster: Cluster) -> None:
    dist = kafka_db.installed_distribution(kafka_cluster)
    where = f"{kafka_cluster.nodes[0].address}:9"  # discard: nothing listens there
    with pytest.raises(HarnessError) as failed:
        api_versions.ask(dist, where, timeout_s=60)
    assert str(failed.value).startswith(f"ApiVersions from {where} failed: ")
    assert "\n" not in str(failed.value)
