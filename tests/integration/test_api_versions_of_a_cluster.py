"""ApiVersions asked of the session's real 4.4.0 brokers, as a run asks before it starts."""

from __future__ import annotations

import json
import time

import pytest
from kafka_chaos.harness import api_versions, kafka_db
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError, HarnessError
from kafka_chaos.harness.spec import ClusterSpec, TestSpec

from kafka_chaos.run import refuse_missing_apis


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


def _spec(cluster: Cluster, **consumer: str) -> TestSpec:
    spec = TestSpec.from_dict({"consumer": consumer})
    spec.cluster = ClusterSpec(name=cluster.name, kafka_version=cluster.kafka_version)
    return spec


def test_a_run_asks_once_per_cluster_setup_and_passes_on_kafka(kafka_cluster: Cluster) -> None:
    kept = kafka_cluster.state_dir / "api-versions.json"
    kept.unlink(missing_ok=True)
    share = _spec(kafka_cluster, mode="share")
    refuse_missing_apis(kafka_cluster, share)  # asks the brokers: 4.4.0 has share groups
    first = json.loads(kept.read_text())
    assert len(first["brokers"]) == 3
    t0 = time.monotonic()
    refuse_missing_apis(kafka_cluster, _spec(kafka_cluster, group_protocol="consumer"))
    assert time.monotonic() - t0 < 2  # the kept answer: no JVM started
    assert json.loads(kept.read_text()) == first


def test_a_broker_without_share_groups_refuses_a_share_run_in_one_line(
    kafka_cluster: Cluster,
) -> None:
    """The answer a broker without KIP-932 gives (as Tansu 0.6.0's does): the run
    stops before any client starts, naming the API and the broker."""
    share = _spec(kafka_cluster, mode="share")
    refuse_missing_apis(kafka_cluster, share)  # keeps this cluster's real answer
    kept = kafka_cluster.state_dir / "api-versions.json"
    real = json.loads(kept.read_text())
    try:
        lacking = json.loads(kept.read_text())
        for broker in lacking["brokers"]:
            broker["apis"]["ShareGroupHeartbeat"] = None
        kept.write_text(json.dumps(lacking))
        refuse_missing_apis(kafka_cluster, _spec(kafka_cluster))  # a queue run still goes
        with pytest.raises(ConfigError) as refused:
            refuse_missing_apis(kafka_cluster, share)
        said = str(refused.value)
        assert "\n" not in said and "needs share groups" in said
        assert "does not support ShareGroupHeartbeat (its ApiVersions answer)" in said
    finally:
        kept.write_text(json.dumps(real))
