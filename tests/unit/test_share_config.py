"""Share-group mode: its settings are checked before a run starts, the client
config is one librdkafka accepts, and acknowledgement choices follow the odds."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import ShareConsumer
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.workloads.share_consumer import AckPolicy, group_settings, share_config

from kafka_chaos.options import build_spec
from kafka_chaos.suite import load_suite

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "consumer,version,message",
    [
        ({"mode": "share"}, "3.9.2", "needs Kafka 4.2 or later"),
        ({"mode": "share", "group_protocol": "consumer"}, "4.4.0", "have their own"),
        ({"mode": "share", "share_release_probability": 0.7, "share_reject_probability": 0.4},
         "4.4.0", "add up to at most 1"),
        ({"mode": "share", "share_reject_probability": -0.1}, "4.4.0", "must be >= 0"),
        ({"mode": "share", "share_lock_ms": 1000}, "4.4.0", "15000..60000"),
        ({"mode": "share", "share_delivery_limit": 1}, "4.4.0", "2..10"),
    ],
)  # fmt: skip
def test_bad_share_settings_are_refused_in_one_line(consumer, version, message) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        build_spec({"consumer": consumer, "cluster": {"kafka_version": version}})
    assert "\n" not in str(e.value)


def test_the_share_group_is_configured_from_the_spec() -> None:
    spec = build_spec(
        {"consumer": {"mode": "share", "share_lock_ms": 20000, "share_delivery_limit": 3}}
    )
    assert group_settings(spec) == {
        "share.auto.offset.reset": "earliest",
        "share.record.lock.duration.ms": "20000",
        "share.delivery.count.limit": "3",
    }
    conf = share_config("127.0.0.1:9", "g", "c")
    assert conf["share.acknowledgement.mode"] == "explicit"
    ShareConsumer(conf).close()  # librdkafka accepts every key


def test_acknowledgements_follow_the_configured_odds() -> None:
    policy = AckPolicy(release=0.2, reject=0.1, rng=random.Random(7))
    got = Counter(policy.choose() for _ in range(20000))
    assert abs(got["release"] / 20000 - 0.2) < 0.02
    assert abs(got["reject"] / 20000 - 0.1) < 0.02
    assert set(AckPolicy.accept_all().choose() for _ in range(100)) == {"accept"}


def test_the_matrix_suite_covers_versions_modes_protocols_and_clients() -> None:
    _, _, entries = load_suite(ROOT / "suites" / "matrix.yaml")
    cells = set()
    for entry in entries:
        spec = build_spec(*entry.layers)
        cells.add(
            (spec.workload, spec.cluster.kafka_version, spec.cluster.mode, spec.consumer.mode,
             spec.consumer.group_protocol, spec.producer.client)
        )  # fmt: skip
        assert spec.producer.client == spec.consumer.client, entry.name
        assert entry.expect == "valid" and spec.nemesis.faults == ["kill"]
    assert cells == {
        ("queue", "3.9.2", "zk", "subscribe", "classic", "librdkafka"),
        ("queue", "3.9.2", "kraft", "subscribe", "classic", "librdkafka"),
        ("queue", "3.9.2", "kraft", "subscribe", "classic", "java"),
        ("txn", "3.9.2", "kraft", "subscribe", "classic", "librdkafka"),
        ("txn", "3.9.2", "kraft", "subscribe", "classic", "java"),
        ("queue", "4.4.0", "kraft", "subscribe", "classic", "librdkafka"),
        ("queue", "4.4.0", "kraft", "subscribe", "classic", "java"),
        ("queue", "4.4.0", "kraft", "subscribe", "consumer", "librdkafka"),
        ("queue", "4.4.0", "kraft", "subscribe", "consumer", "java"),
        ("txn", "4.4.0", "kraft", "subscribe", "classic", "librdkafka"),
        ("txn", "4.4.0", "kraft", "subscribe", "classic", "java"),
        ("queue", "4.4.0", "kraft", "share", "classic", "librdkafka"),
        ("queue", "4.4.0", "kraft", "share", "classic", "java"),
    }
