"""Reading a broker's ApiVersions answer: Kafka 4.4.0's own, as its tool printed it.

tests/unit/data/broker-api-versions-4.4.0.txt is the output of
``BrokerApiVersionsCommand`` against a 3-broker 4.4.0 cluster of this harness.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_chaos.harness import api_versions
from kafka_chaos.harness.errors import HarnessError

KAFKA_4_4 = (Path(__file__).parent / "data" / "broker-api-versions-4.4.0.txt").read_text()


def test_every_broker_and_api_is_read() -> None:
    brokers = api_versions.parse(KAFKA_4_4)
    assert sorted(b.node_id for b in brokers) == [1, 2, 3]
    assert all(b.address.endswith(":9092") for b in brokers)
    first = brokers[0]
    assert first.apis["Produce"] == (0, 13)
    assert first.apis["Fetch"] == (4, 18)
    assert first.apis["ShareGroupHeartbeat"] == (1, 1)  # "1 [usable: 1]": one version
    assert len(first.apis) > 70


def test_kafka_4_4_supports_every_capability_the_workloads_use() -> None:
    for broker in api_versions.parse(KAFKA_4_4):
        for capability in api_versions.NEEDS:
            assert broker.lacks(capability) == [], capability
    brokers = api_versions.parse(KAFKA_4_4)
    assert api_versions.refusal(brokers, list(api_versions.NEEDS), "the txn workload") is None


def test_a_broker_without_end_txn_is_refused_in_one_line() -> None:
    # Tansu 0.6.0 routes no EndTxn (docs/brokers.md): its answer lacks the line.
    text = "\n".join(line for line in KAFKA_4_4.splitlines() if "EndTxn(" not in line)
    brokers = api_versions.parse(text)
    line = api_versions.refusal(brokers, ["transactions"], "the txn workload")
    assert line is not None and "\n" not in line
    assert line.startswith("the txn workload needs transactions, and the broker at ")
    assert line.endswith("does not support EndTxn (its ApiVersions answer)")
    assert api_versions.refusal(brokers, ["idempotent producers"], "queue") is None


def test_an_unsupported_api_line_counts_as_lacking() -> None:
    text = KAFKA_4_4.replace("ShareFetch(78): 1 to 2 [usable: 2]", "ShareFetch(78): UNSUPPORTED")
    assert "ShareFetch(78): UNSUPPORTED" in text
    (first, *_) = api_versions.parse(text)
    assert first.apis["ShareFetch"] is None
    assert first.lacks("share groups") == ["ShareFetch"]


def test_output_naming_no_broker_is_an_error() -> None:
    with pytest.raises(HarnessError, match="no broker answered"):
        api_versions.parse("Exception in thread main: TimeoutException\n")
