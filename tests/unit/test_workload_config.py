"""Client configs, offset bookkeeping, rate verdicts and the sample file."""

from __future__ import annotations

import json
import threading

import pytest
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.kafka_clients import CallTimedOut, bounded_call
from kafka_chaos.harness.kafka_names import group_name
from kafka_chaos.harness.spec import ProducerSpec, TestSpec
from kafka_chaos.workloads.consumer import assigned_partitions, consumer_config, next_offsets
from kafka_chaos.workloads.lifecycle import rate_verdict
from kafka_chaos.workloads.producer import producer_config, single_attempt
from kafka_chaos.workloads.sampler import ClusterSampler, at_most_every, partition_row


def test_producer_config_carries_the_spec():
    conf = producer_config(
        ProducerSpec(acks="1", enable_idempotence=False, retries=3), "b:9092", "x"
    )
    assert conf["acks"] == "1"
    assert conf["enable.idempotence"] is False
    assert conf["retries"] == 3
    assert conf["delivery.timeout.ms"] == 15000
    assert conf["request.timeout.ms"] == 5000
    assert "retries" not in producer_config(ProducerSpec(), "b:9092", "x")


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"acks": "2"}, "producer.acks"),
        ({"acks": "1"}, "needs acks=all"),
        ({"retries": 0}, "needs retries > 0"),
        ({"max_in_flight": 6}, "max_in_flight <= 5"),
        ({"delivery_timeout_ms": 1000}, "delivery_timeout_ms"),
        ({"message_bytes": 0}, "message_bytes"),
    ],
)
def test_producer_config_rejects_contradictions(changes, message):
    with pytest.raises(ConfigError, match=message):
        producer_config(ProducerSpec(**changes), "b:9092", "x")


def test_single_attempt_only_without_retries_or_idempotence():
    assert single_attempt(ProducerSpec(enable_idempotence=False, acks="1", retries=0))
    assert not single_attempt(ProducerSpec(enable_idempotence=False, acks="1", retries=None))
    assert not single_attempt(ProducerSpec())


def test_consumer_config_and_validation():
    spec = TestSpec(name="t")
    spec.topic.name = "chaos-1"
    conf = consumer_config(spec, "b:9092", group_name(spec, 2), "c")
    assert conf["group.id"] == "chaos-1-g2"
    assert conf["enable.auto.commit"] is True
    spec.consumer.commit = "manual"
    assert consumer_config(spec, "b", "g", "c")["enable.auto.commit"] is False
    spec.consumer.mode = "steal"
    with pytest.raises(ConfigError, match="consumer.mode"):
        consumer_config(spec, "b", "g", "c")


def test_next_offsets_is_one_past_the_highest_read():
    records = [
        {"topic": "t", "partition": 1, "offset": 5},
        {"topic": "t", "partition": 0, "offset": 9},
        {"topic": "t", "partition": 1, "offset": 7},
    ]
    assert next_offsets(records) == [["t", 0, 10], ["t", 1, 8]]
    assert next_offsets([]) == []


def test_assign_mode_splits_every_partition_once():
    owned = [assigned_partitions(7, 3, slot) for slot in range(3)]
    assert sorted(p for ps in owned for p in ps) == list(range(7))
    with pytest.raises(ConfigError):
        assigned_partitions(7, 3, 3)


def test_rate_verdict_reports_shortfall_with_numbers():
    short, msg = rate_verdict(1000, 850)
    assert short and "85%" in msg and "SHORTFALL" in msg
    assert rate_verdict(1000, 950) == (False, rate_verdict(1000, 950)[1])
    assert not rate_verdict(0, 5)[0]


def test_bounded_call_returns_raises_and_times_out():
    assert bounded_call(lambda: 42, 1.0, "x") == 42
    with pytest.raises(ZeroDivisionError):
        bounded_call(lambda: 1 / 0, 1.0, "x")
    gate = threading.Event()
    with pytest.raises(CallTimedOut, match="slow"):
        bounded_call(lambda: gate.wait(5), 0.1, "slow")
    gate.set()


def test_sampler_writes_samples_and_errors(tmp_path):
    calls = iter([RuntimeError("broker down"), None])

    def probe():
        outcome = next(calls)
        if outcome is not None:
            raise outcome
        row = {"topic": "t", "partition": 0, "leader": 1, "replicas": [1, 2], "isr": [1]}
        return 2, [partition_row(row)]

    clock = iter(range(0, 10**10, 10**6))
    sampler = ClusterSampler(probe, tmp_path / "cs.jsonl", lambda: next(clock))
    with open(sampler.path, "a") as out:
        sampler.sample_once(out)
        sampler.sample_once(out)
    lines = [json.loads(x) for x in sampler.path.read_text().splitlines()]
    assert lines[0]["error"] == "RuntimeError: broker down" and lines[0]["partitions"] == []
    assert lines[1]["controller"] == 2 and lines[1]["error"] is None
    assert lines[1]["partitions"][0]["isr"] == [1]
    assert sampler.errors == 1 and sampler.samples == 2


def test_a_throttled_query_is_repeated_only_once_its_period_has_passed():
    answers = iter(range(100))
    now = [0.0]
    controller = at_most_every(19.0, lambda: next(answers), clock=lambda: now[0])
    seen = []
    for t in (0.0, 1.0, 18.9, 19.0, 20.0, 38.0):
        now[0] = t
        seen.append(controller())
    assert seen == [0, 0, 0, 1, 1, 2]
    every_time = at_most_every(0.0, lambda: next(answers), clock=lambda: now[0])
    assert [every_time(), every_time()] == [3, 4]  # host-speed clusters: every sample asks
