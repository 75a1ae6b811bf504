"""The cluster's finalized features, read from kafka-features.sh's output."""

from __future__ import annotations

from kafka_chaos.harness.kafka_db import parse_features
from kafka_chaos.reports.render import client

DESCRIBE = (
    "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.4-IV2\t"
    "FinalizedVersionLevel: 4.4-IV2\tEpoch: 1666\n"
    "Feature: transaction.version   SupportedMinVersion: 0   SupportedMaxVersion: 2   "
    "FinalizedVersionLevel: 2   Epoch: 1666\n"
    "some warning line\n"
)


def test_each_features_finalized_level_is_read() -> None:
    assert parse_features(DESCRIBE) == {"metadata.version": "4.4-IV2", "transaction.version": "2"}
    assert parse_features("") == {}


def test_the_report_names_the_client_and_for_transactions_the_protocol() -> None:
    versions = {"librdkafka": "2.16.0", "kafka_clients": "4.4.0"}
    java = {"client": "java"}
    assert client({"versions": versions}) == "librdkafka 2.16.0"
    assert client({"versions": versions, "producer": java, "consumer": java}) == "Java 4.4.0"
    assert client({"versions": versions, "producer": java}) == (
        "Java 4.4.0 producers, librdkafka 2.16.0 consumers"
    )
    txn = {"workload": "txn", "versions": versions, "producer": java, "consumer": java,
           "cluster_features": {"transaction.version": "2"}}  # fmt: skip
    assert client(txn) == "Java 4.4.0; transaction.version 2"
