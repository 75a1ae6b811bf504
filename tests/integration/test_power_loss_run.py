"""Power loss on a real cluster whose broker data sits on lazyfs.

One power-loss of every broker serves two claims, on two topics written
just before it with acks=all: Kafka's default never fsyncs, so every
acknowledged write is gone afterwards; a topic that fsyncs each message
(``flush.messages=1``) keeps all of them.  A third test SIGKILLs the
harness while it brings a lazyfs cluster up, and ``cluster down`` must
leave no mount and no lazyfs process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from _kafka_clusters import SHARED_CLUSTER, running_cluster
from _local_leftovers import down, leftovers, pids_from_files, procs_mentioning

from harness import admin, kafka_db, lazyfs
from harness.cluster import Cluster, cluster_dir
from harness.spec import NEWEST_KAFKA, ClusterSpec, TopicSpec
from nemeses.base import FaultOp
from nemeses.power_loss import PowerLoss


def _lazyfs_missing() -> str:
    """Why lazyfs cannot run here ('' when it can): setup.sh builds it only where its
    source is at hand (../shared/sources, a checkout, the cache or GitHub) and only warns
    otherwise, so its tests say why they skip instead of failing on a missing binary."""
    from harness import lazyfs_build
    from harness.errors import HarnessError

    try:
        lazyfs_build.binary()
    except HarnessError as e:
        return str(e)
    return ""


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
    pytest.mark.skipif(bool(_lazyfs_missing()), reason=_lazyfs_missing() or "lazyfs built"),
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
def after_power_loss() -> dict[str, tuple[int, int]]:
    """Per topic: (acknowledged before, log end offset after) one power-loss of every broker."""
    spec = ClusterSpec(
        name=f"{SHARED_CLUSTER}-pl"[:32], nodes=3, kafka_version=NEWEST_KAFKA, disk="lazyfs"
    )
    with running_cluster(spec) as cluster:
        yield _power_loss_all(cluster)


def _power_loss_all(cluster: Cluster) -> dict[str, tuple[int, int]]:
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
        name: (acked[name], admin.end_offsets(bootstrap, name, 1, timeout_s=30)[0])
        for name in topics
    }


def test_acked_writes_never_fsynced_are_gone_after_power_loss_of_all(after_power_loss):
    acked, kept = after_power_loss[DEFAULTS]
    assert acked == MESSAGES
    assert kept == 0, f"{kept} of {acked} acknowledged, never fsynced messages survived"


def test_acked_writes_fsynced_per_message_survive_power_loss_of_all(after_power_loss):
    acked, kept = after_power_loss[FLUSHED]
    assert (acked, kept) == (MESSAGES, MESSAGES)


NAME = f"{SHARED_CLUSTER}-plk"[:32]
START_DEADLINE_S = 300


def test_down_after_sigkill_leaves_no_mount_and_no_lazyfs(tmp_path: Path) -> None:
    assert down(NAME).returncode == 0  # a leftover of an earlier, killed session
    root = cluster_dir(NAME)
    log = (tmp_path / "up.log").open("w")
    up = subprocess.Popen(
        ["kafka-chaos", "cluster", "up", "--name", NAME, "--nodes", "1", "--disk", "lazyfs"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while not list(root.glob("nodes/*/run/kafka.pid")):  # mounted, Kafka starting
            assert up.poll() is None, f"cluster up ended early: {(tmp_path / 'up.log').read_text()}"
            assert time.monotonic() < deadline, "no broker started in time"
            time.sleep(0.2)
        os.killpg(up.pid, signal.SIGKILL)
        up.wait(timeout=10)
        assert lazyfs.mounted_below(str(root)), "the harness died with the mount in place"
        slot = json.loads((root / "cluster.json").read_text())["backend_state"]["slot"]
        pids = pids_from_files(root)
        assert (root / "nodes" / "n1" / "run" / "lazyfs.pid").is_file()
        result = down(NAME)
        assert result.returncode == 0, result.stdout + result.stderr
        assert lazyfs.mounted_below(str(root)) == []
        assert procs_mentioning(root) == []
        assert leftovers(NAME, slot, root, pids) == []
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
        down(NAME)
