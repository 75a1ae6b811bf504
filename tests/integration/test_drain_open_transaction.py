"""The final drain reads past a transaction left open by a crashed client.

A read_committed client asked for "latest" gets the last stable offset, which
stops at the first record of any open transaction.  A drain that took that for
the high watermark once ended early and called committed records behind an
abandoned transaction unseen (a CI failure of the transactional workload).
Here a transactional producer leaves a transaction open in partition 0,
another commits a record behind it, and the drain must still read that record
once the coordinator aborts the abandoned transaction.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from kafka_chaos.harness import admin
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.history import HistoryWriter, read_history
from kafka_chaos.harness.spec import TopicSpec
from kafka_chaos.workloads.drain import final_drain

pytestmark = pytest.mark.integration

ABANDONED_TIMEOUT_MS = 5000  # the coordinator aborts it within this plus its 10 s sweep


def _producer(bootstrap: str, txn_id: str, **extra: object) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **extra})
    p.init_transactions(30)
    return p


def test_the_drain_waits_for_an_abandoned_transaction(kafka_cluster: Cluster, tmp_path) -> None:
    bootstrap = kafka_cluster.bootstrap_servers()
    topic = TopicSpec(name=f"drain-open-txn-{uuid.uuid4().hex[:6]}", partitions=1)
    admin.create_topic(bootstrap, topic, timeout_s=60)
    try:
        abandoned = _producer(
            bootstrap, f"{topic.name}-a", **{"transaction.timeout.ms": ABANDONED_TIMEOUT_MS}
        )
        abandoned.begin_transaction()
        abandoned.produce(topic.name, b"1 open", partition=0)
        abandoned.flush(30)  # on the log, never committed nor aborted by the client
        committer = _producer(bootstrap, f"{topic.name}-c")
        committer.begin_transaction()
        committer.produce(topic.name, b"2 committed", partition=0)
        committer.commit_transaction(30)
        del committer
        with HistoryWriter(tmp_path / "history.jsonl") as history:
            result = final_drain(bootstrap, topic.name, 1, history, 99, timeout_s=60)
        del abandoned  # kept alive until here so the client cannot end the transaction
    finally:
        admin.delete_topic(bootstrap, topic.name, timeout_s=30)
    read = [
        (r["offset"], r["value"])
        for o in read_history(tmp_path / "history.jsonl")
        if o["f"] == "poll" and o["type"] == "ok"
        for r in o["value"]["records"]
    ]
    assert result.complete, result
    # 2 records and 2 markers; the abort marker may land after the last watermark query
    assert result.reached[0] == 4 and result.high_watermarks[0] in (3, 4), result
    assert read == [(1, 2)], read  # the committed record behind the open one, nothing aborted
