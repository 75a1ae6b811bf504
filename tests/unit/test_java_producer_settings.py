"""The Java producer's settings mean what librdkafka's mean, or are refused in one line."""

from __future__ import annotations

import pytest
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.spec import ProducerSpec, TestSpec
from kafka_chaos.workloads.java.producer import MAX_BLOCK_MS, java_producer_properties
from kafka_chaos.workloads.producer import producer_config

from kafka_chaos.options import build_spec, validate


def test_every_producer_setting_has_its_java_twin() -> None:
    p = ProducerSpec(acks="1", enable_idempotence=False, retries=0, max_in_flight=3,
                     linger_ms=7, request_timeout_ms=4000, delivery_timeout_ms=12000)  # fmt: skip
    java = java_producer_properties(p, "n1:9092", "run-p0")
    rdkafka = producer_config(p, "n1:9092", "run-p0")
    same = (
        "bootstrap.servers", "client.id", "acks", "max.in.flight.requests.per.connection",
        "linger.ms", "request.timeout.ms", "delivery.timeout.ms", "retries",
    )  # fmt: skip
    for key in same:
        assert java[key] == str(rdkafka[key]), key
    assert java["enable.idempotence"] == "false"
    # send() may block on metadata or buffer space; produce() never does.
    assert java["max.block.ms"] == str(MAX_BLOCK_MS)
    assert "socket.timeout.ms" not in java  # no Java twin: request.timeout.ms bounds requests


def test_default_retries_stay_the_clients_own() -> None:
    assert "retries" not in java_producer_properties(ProducerSpec(), "n1:9092", "p")
    assert java_producer_properties(ProducerSpec(acks="-1"), "n1:9092", "p")["acks"] == "all"


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"enable_idempotence": True, "acks": "1"}, "enable_idempotence needs acks=all"),
        ({"enable_idempotence": True, "max_in_flight": 6}, "max_in_flight <= 5"),
        ({"delivery_timeout_ms": 1000}, "must be at least request_timeout_ms"),
    ],
)
def test_contradictions_are_refused_as_for_librdkafka(settings, message) -> None:
    with pytest.raises(ConfigError, match=message):
        java_producer_properties(ProducerSpec(**settings), "n1:9092", "p")


def test_the_client_is_validated_with_the_spec() -> None:
    spec = build_spec({"producer": {"client": "java"}})
    validate(spec)
    assert spec.producer.client == "java" and TestSpec().producer.client == "librdkafka"
    with pytest.raises(ConfigError, match="producer.client must be librdkafka or java"):
        validate(build_spec({"producer": {"client": "kafka-python"}}))
    with pytest.raises(ConfigError, match="set both with --client"):
        validate(build_spec({"workload": "txn", "producer": {"client": "java"}}))
    validate(
        build_spec(
            {"workload": "txn", "producer": {"client": "java"}, "consumer": {"client": "java"}}
        )
    )
