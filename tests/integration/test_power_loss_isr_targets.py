"""``--targets isr`` on a real lazyfs cluster: the cut hits exactly one partition's ISR.

At RF 2 on 3 nodes the ISR of a partition is two brokers, so ``isr`` is a
cut that ``all`` is not.  The fault runs through the nemesis runner, as a
run does: its target is looked up when it starts (the busiest partition,
the only one written to here), and the history's start line and
``schedule.json`` record it under ``resolved``.  That must be the ISR the
topic described just before the cut; those two brokers restart with their
lazyfs caches cleared, and the third broker keeps its process and its cache.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _kafka_clusters import SHARED_CLUSTER, running_cluster
from _lazyfs_skip import lazyfs_missing
from kafka_chaos.harness import admin, kafka_db, lazyfs
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.history import HistoryWriter, read_history
from kafka_chaos.harness.node import Node
from kafka_chaos.harness.spec import NEWEST_KAFKA, ClusterSpec, NemesisSpec, TestSpec, TopicSpec
from kafka_chaos.nemeses.runner import NemesisRunner
from kafka_chaos.nemeses.schedule import Schedule

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
    pytest.mark.skipif(bool(lazyfs_missing()), reason=lazyfs_missing() or "lazyfs built"),
]

TOPIC = "isr-rf2"
BUSY = 1  # the only partition written to: the busiest, so the one isr targets


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    spec = ClusterSpec(
        name=f"{SHARED_CLUSTER}-isr"[:32], nodes=3, kafka_version=NEWEST_KAFKA, disk="lazyfs"
    )
    with running_cluster(spec) as c:
        yield c


def _produce(bootstrap: str, n: int) -> int:
    from confluent_kafka import Producer

    acked = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0})
    for i in range(n):
        producer.produce(TOPIC, value=str(i).encode(), partition=BUSY,
                         on_delivery=lambda e, m: acked.append(e))  # fmt: skip
    assert producer.flush(60) == 0, "messages still queued after 60 s"
    return sum(1 for e in acked if e is None)


def _kafka_pid(node: Node) -> str:
    return Path(kafka_db.KAFKA.pid_file(node)).read_text().strip()


def _clears(cluster: Cluster, node: Node) -> int:
    """How many clear-caches ``node``'s lazyfs has confirmed in its log."""
    log = Path(lazyfs.records(cluster.backend_state)[node.name]["log"])
    return log.read_text(errors="replace").count(lazyfs.CLEARED_LINE)


def test_power_loss_with_targets_isr_cuts_exactly_the_partitions_isr(
    cluster: Cluster, tmp_path: Path
) -> None:
    bootstrap = cluster.bootstrap_servers()
    admin.create_topic(
        bootstrap, TopicSpec(name=TOPIC, partitions=3, replication_factor=2, min_insync_replicas=1)
    )
    kafka_db.wait_healthy(cluster, 120.0, topic=TOPIC)
    assert _produce(bootstrap, 100) == 100
    kafka_db.wait_healthy(cluster, 60.0, topic=TOPIC)  # both replicas in sync
    before = {p.partition: p for p in admin.describe_topics(bootstrap, [TOPIC], timeout_s=30)}
    isr = sorted(before[BUSY].isr)
    assert len(isr) == 2, before[BUSY]
    hit = sorted(cluster.node(b).name for b in isr)
    [spared] = [n for n in cluster.nodes if n.node_id not in isr]
    pids = {n.name: _kafka_pid(n) for n in cluster.nodes}
    clears = {n.name: _clears(cluster, n) for n in cluster.nodes}

    op = {"id": 0, "f": "power-loss", "at_s": 0.5, "duration_s": 3.0, "targets": [],
          "target": "isr"}  # fmt: skip
    spec = TestSpec(time_limit_s=10.0, topic=TopicSpec(name=TOPIC),
                    nemesis=NemesisSpec(schedule=[op]))  # fmt: skip
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        runner = NemesisRunner(cluster, spec, history, tmp_path)
        runner.start()
        runner.join(120.0)
        runner.stop()
    kafka_db.wait_healthy(cluster, 120.0, topic=TOPIC)

    [start, end] = [h["value"] for h in read_history(tmp_path / "history.jsonl")]
    print(start)
    assert (start["phase"], end["phase"]) == ("start", "end")
    assert "error" not in start and "heal_error" not in end, (start, end)
    resolved = start["resolved"]
    assert (resolved["topic"], resolved["partition"]) == (TOPIC, BUSY)
    assert resolved["partition_choice"].startswith("busiest")
    assert sorted(resolved["isr"]) == isr and resolved["nodes"] == hit
    assert start["targets"] == hit and end["resolved"]["unsynced_dropped"] == hit
    [realised] = Schedule.load(tmp_path / "schedule.json").ops
    assert realised.targets == hit and realised.resolved["nodes"] == hit  # what a replay hits

    for name in hit:  # cut: a new broker process, one more confirmed clear-cache
        node = cluster.node(name)
        assert _kafka_pid(node) != pids[name] and _clears(cluster, node) == clears[name] + 1
    # untouched: the same broker process, its lazyfs cache never cleared
    assert _kafka_pid(spared) == pids[spared.name] and kafka_db.is_running(spared)
    assert _clears(cluster, spared) == clears[spared.name]
