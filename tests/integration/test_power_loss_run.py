"""Power loss on a real cluster whose broker data sits on lazyfs.

One power-loss of every broker serves two claims, on two topics written
just before it with acks=all: Kafka's default never fsyncs, so every
acknowledged write is gone afterwards; a topic that fsyncs each message
(``flush.messages=1``) keeps all of them; and each broker's own log says
so (the log end it recovered each topic's partition to).  A third test SIGKILLs the
harness while it brings a lazyfs cluster up, and ``cluster down`` must
leave no mount and no lazyfs process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from shlex import quote

import pytest
from _kafka_clusters import SHARED_CLUSTER, running_cluster
from _lazyfs_skip import lazyfs_missing
from _local_leftovers import (
    down,
    leftovers,
    pids_from_files,
    procs_mentioning,
    up_killed_once_kafka_starts,
)
from kafka_chaos.forensics.recovery_log import recovery_lines
from kafka_chaos.harness import admin, kafka_db, lazyfs
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.spec import NEWEST_KAFKA, ClusterSpec, TopicSpec
from kafka_chaos.nemeses.base import FaultOp
from kafka_chaos.nemeses.power_loss import PowerLoss

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
    pytest.mark.skipif(bool(lazyfs_missing()), reason=lazyfs_missing() or "lazyfs built"),
]

MESSAGES = 200
DEFAULTS, FLUSHED = "pl-defaults", "pl-flush-each"


def _produce(bootstrap: str, topic: str, n: int) -> int:
    """Send ``n`` messages with acks=all; how many the brokers acknowledged."""
    from confluent_kafka import Producer

    acked = []
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
         "linger.ms": 5, "log_level": 0}
    )  # fmt: skip
    for i in range(n):
        producer.produce(topic, value=str(i).encode(), on_delivery=lambda e, m: acked.append(e))
    assert producer.flush(60) == 0, "messages still queued after 60 s"
    return sum(1 for e in acked if e is None)


@pytest.fixture(scope="module")
def after_power_loss() -> dict[str, tuple[int, int, dict[str, int | None]]]:
    """Per topic: (acknowledged before, log end offset after, and the log end each
    broker's server.log says it recovered to) one power-loss of every broker."""
    spec = ClusterSpec(
        name=f"{SHARED_CLUSTER}-pl"[:32], nodes=3, kafka_version=NEWEST_KAFKA, disk="lazyfs"
    )
    with running_cluster(spec) as cluster:
        yield _power_loss_all(cluster)


def _recovered(cluster: Cluster, topic: str) -> dict[str, int | None]:
    """Per node, the log end its last "Completed load of Log" line of ``topic``-0 gives."""
    out: dict[str, int | None] = {}
    for node in cluster.nodes:
        text = node.run(f"cat {quote(node.path('logs', 'server.log'))}", timeout=30).stdout
        ends = [r.offset for r in recovery_lines(text.splitlines(), topic) if r.kind == "loaded"]
        out[node.name] = ends[-1] if ends else None
    return out


def _power_loss_all(cluster: Cluster) -> dict[str, tuple[int, int, dict[str, int | None]]]:
    bootstrap = cluster.bootstrap_servers()
    topics = {
        DEFAULTS: TopicSpec(name=DEFAULTS, partitions=1, min_insync_replicas=2),
        FLUSHED: TopicSpec(
            name=FLUSHED, partitions=1, min_insync_replicas=2, config={"flush.messages": "1"}
        ),
    }
    acked = {}
    for name, topic in topics.items():
        admin.create_topic(bootstrap, topic)
        acked[name] = _produce(bootstrap, name, MESSAGES)
    op = FaultOp(0, "power-loss", 0.0, 1.0, targets=[n.name for n in cluster.nodes])
    kind = PowerLoss()
    kind.check_cluster(cluster)
    kind.apply(cluster, op, cluster.nodes, None)
    try:
        assert op.resolved == {"unsynced_dropped": ["n1", "n2", "n3"]}
    finally:
        kind.heal(cluster, op, cluster.nodes)
    for name in topics:
        kafka_db.wait_healthy(cluster, 120.0, topic=name)
    return {
        name: (
            acked[name],
            admin.end_offsets(bootstrap, name, 1, timeout_s=30)[0],
            _recovered(cluster, name),
        )
        for name in topics
    }


def test_acked_writes_never_fsynced_are_gone_after_power_loss_of_all(after_power_loss):
    acked, kept, _ = after_power_loss[DEFAULTS]
    assert acked == MESSAGES
    assert kept == 0, f"{kept} of {acked} acknowledged, never fsynced messages survived"


def test_acked_writes_fsynced_per_message_survive_power_loss_of_all(after_power_loss):
    acked, kept, _ = after_power_loss[FLUSHED]
    assert (acked, kept) == (MESSAGES, MESSAGES)


def test_each_broker_logs_the_log_end_it_recovered_to(after_power_loss):
    """The brokers' own account (forensics.recovery_log) agrees with what was kept."""
    nodes = ("n1", "n2", "n3")
    assert after_power_loss[DEFAULTS][2] == dict.fromkeys(nodes, 0)
    assert after_power_loss[FLUSHED][2] == dict.fromkeys(nodes, MESSAGES)


NAME = f"{SHARED_CLUSTER}-plk"[:32]


def test_down_after_sigkill_leaves_no_mount_and_no_lazyfs(tmp_path: Path) -> None:
    with up_killed_once_kafka_starts(NAME, "lazyfs", tmp_path / "up.log") as root:
        assert lazyfs.mounted_below(str(root)), "the harness died with the mount in place"
        slot = json.loads((root / "cluster.json").read_text())["backend_state"]["slot"]
        pids = pids_from_files(root)
        assert (root / "nodes" / "n1" / "run" / "lazyfs.pid").is_file()
        result = down(NAME)
        assert result.returncode == 0, result.stdout + result.stderr
        assert lazyfs.mounted_below(str(root)) == []
        assert procs_mentioning(root) == []
        assert leftovers(NAME, slot, root, pids) == []
