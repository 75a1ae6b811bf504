"""Every transactional preset builds clients librdkafka accepts.

librdkafka validates settings only when a client is created, so a bad
combination (socket.timeout.ms above transaction.timeout.ms + 100 once made
every txn-pause-hunt client fail 160 times in a row) surfaces here, not in
a run.  Creating a client does not need a reachable broker.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer
from kafka_chaos.workloads.txn_client import consumer_config, producer_config

from kafka_chaos.options import build_spec
from kafka_chaos.scenarios import SCENARIOS, scenario_layer

TXN_SCENARIOS = sorted(n for n, s in SCENARIOS.items() if s.get("workload") == "txn")
NOWHERE = "127.0.0.1:9"  # the discard port on this machine; nothing is sent


def test_there_are_txn_scenarios() -> None:
    assert {"txn-clean", "txn-kill", "txn-pause-hunt", "abort-rewind"} <= set(TXN_SCENARIOS)


@pytest.mark.parametrize("name", TXN_SCENARIOS)
def test_scenario_clients_are_accepted_by_librdkafka(name: str) -> None:
    spec = build_spec(scenario_layer(name))
    Producer(producer_config(spec, NOWHERE, 0, 0))
    Consumer(consumer_config(spec, NOWHERE, 0)).close()


@pytest.mark.parametrize("timeout_ms", [1000, 3000, 60000])
def test_any_valid_transaction_timeout_gives_a_valid_producer(timeout_ms: int) -> None:
    spec = build_spec({"workload": "txn", "txn": {"transaction_timeout_ms": timeout_ms}})
    conf = producer_config(spec, NOWHERE, 0, 0)
    assert conf["socket.timeout.ms"] <= timeout_ms + 100
    assert conf["delivery.timeout.ms"] <= timeout_ms
    Producer(conf)
