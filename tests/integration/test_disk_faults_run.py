"""disk-full and corrupt-segment on a real 3-node cluster whose log directories are tmpfs mounts.

disk-full: the target's log directory really reaches ENOSPC (statvfs says 0
bytes free), the broker says so in its log and halts (Kafka stops a broker
whose only log directory failed), and the heal frees the space and brings
it back: the topic takes acks=all writes on all three replicas again.

corrupt-segment: the tail of one follower's active segment is flipped or
cut while its broker is down; on restart Kafka's recovery finds it (its
own log lines), truncates the bad tail, fetches it again from the leader,
and the replicas agree again (replica verification) with every
acknowledged write kept.

After a crash, ``heal_cluster``'s sweep removes a ballast and restarts the
broker.  The last test SIGKILLs the harness while it brings a tmpfs cluster up:
``cluster down`` must leave no mount.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _kafka_clusters import SHARED_CLUSTER, running_cluster
from _local_leftovers import (
    down,
    leftovers,
    pids_from_files,
    procs_mentioning,
    up_killed_once_kafka_starts,
)
from _waiting import wait_for
from kafka_chaos.forensics import replica_verify
from kafka_chaos.harness import admin, kafka_db, lazyfs, tmpfs_disk
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.node import Node, quote
from kafka_chaos.harness.spec import NEWEST_KAFKA, ClusterSpec, TopicSpec
from kafka_chaos.nemeses.base import FaultOp
from kafka_chaos.nemeses.corrupt_segment import CorruptSegment
from kafka_chaos.nemeses.disk_full import DiskFull
from kafka_chaos.nemeses.runner import apply, heal_cluster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
]

MESSAGES = 200


def _produce(bootstrap: str, topic: str, n: int, start: int = 0) -> int:
    """Send ``n`` messages with acks=all; how many the brokers acknowledged."""
    from confluent_kafka import Producer

    acked = []
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
         "linger.ms": 5, "log_level": 0}
    )  # fmt: skip
    for i in range(start, start + n):
        producer.produce(topic, value=str(i).encode(), on_delivery=lambda e, m: acked.append(e))
    assert producer.flush(90) == 0, "messages still queued after 90 s"
    return sum(1 for e in acked if e is None)


def _topic(cluster: Cluster, name: str) -> str:
    admin.create_topic(
        cluster.bootstrap_servers(), TopicSpec(name=name, partitions=1, min_insync_replicas=2)
    )
    kafka_db.wait_healthy(cluster, 120.0, topic=name)
    assert _produce(cluster.bootstrap_servers(), name, MESSAGES) == MESSAGES
    return name


def _follower(cluster: Cluster, topic: str) -> Node:
    [state] = admin.describe_topics(cluster.bootstrap_servers(), [topic], timeout_s=30)
    print(f"{topic}: {state}")
    return next(n for n in cluster.nodes if n.node_id != state.leader)


def _segment_bytes(node: Node, topic: str) -> int:
    """Bytes in the follower's segments of partition 0 (the local backend shares the disk)."""
    segments = Path(node.path("data", "kafka", f"{topic}-0")).glob("*.log")
    return sum(f.stat().st_size for f in segments)


def _log_size(node: Node) -> int:
    out = node.run(f"stat -c %s {quote(node.path('logs', 'server.log'))}", timeout=15).stdout
    return int(out.strip())


def _log_since(node: Node, at: int) -> str:
    path = quote(node.path("logs", "server.log"))
    return node.run(f"tail -c +{at + 1} {path}", timeout=30).stdout


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    spec = ClusterSpec(
        name=f"{SHARED_CLUSTER}-df"[:32], nodes=3, kafka_version=NEWEST_KAFKA, disk="tmpfs"
    )
    with running_cluster(spec) as c:
        yield c


def test_disk_full_meets_enospc_and_heal_brings_the_broker_back(cluster: Cluster) -> None:
    topic = _topic(cluster, "df-topic")
    node = _follower(cluster, topic)
    rec = tmpfs_disk.records(cluster.backend_state)[node.name]
    op = FaultOp(1, "disk-full", 0.0, 1.0, targets=[node.name])
    kind = DiskFull()
    kind.check_cluster(cluster)
    kind.apply(cluster, op, [node], topic)
    filled = op.resolved["disk_full"][node.name]
    st = os.statvfs(rec["mount"])
    assert filled["free_bytes"] == 0 and st.f_bavail == 0, "the log directory still has room"
    assert filled["ballast_bytes"] > 0
    # acks=all with min.insync.replicas=2: the two other replicas still take writes
    assert _produce(cluster.bootstrap_servers(), topic, 20, MESSAGES) == 20
    wait_for(f"{node.name}'s broker to halt", lambda: not kafka_db.is_running(node), 120.0)
    kind.heal(cluster, op, [node])
    seen = op.resolved["disk_full"][node.name]
    print(json.dumps(seen, indent=1))
    assert seen["enospc_seen"], seen["broker_lines"]
    assert seen["broker_halted"] and seen["ballast_removed"] and seen["restarted"]
    assert any("have failed" in line or "Shutdown broker" in line for line in seen["broker_lines"])
    assert os.statvfs(rec["mount"]).f_bavail > 0
    kafka_db.wait_healthy(cluster, 180.0, topic=topic)  # back in the ISR
    assert _produce(cluster.bootstrap_servers(), topic, 20, MESSAGES + 20) == 20
    ends = admin.end_offsets(cluster.bootstrap_servers(), topic, 1, timeout_s=30)
    assert ends[0] == MESSAGES + 40


@pytest.mark.parametrize(
    ("mode", "line"),
    [
        ("flip", "Found invalid messages in log segment"),
        ("truncate", "Corruption found in segment"),
    ],
)
def test_corrupt_segment_shows_kafka_recovery(
    cluster: Cluster, tmp_path: Path, mode: str, line: str
) -> None:
    topic = _topic(cluster, f"cs-{mode}")
    node = _follower(cluster, topic)
    wait_for(f"{topic}-0's data on {node.name}", lambda: _segment_bytes(node, topic), 60.0)
    at = _log_size(node)
    op = FaultOp(2, "corrupt-segment", 0.0, 1.0, [node.name], params={"mode": mode, "bytes": 8})
    kind = CorruptSegment()
    kind.apply(cluster, op, [node], topic)
    done = op.resolved["corrupted"][node.name]
    print(json.dumps(done, indent=1))
    assert done["partition"] == 0 and done["bytes"] == 8
    cut = 8 if mode == "truncate" else 0
    assert done["size_after"] == done["size_before"] - cut
    assert not kafka_db.is_running(node)
    kind.heal(cluster, op, [node])
    said = wait_for(
        f"{node.name}'s recovery of {topic}-0",
        lambda: [x for x in _log_since(node, at).splitlines() if line in x and f"{topic}-0" in x],
        90.0,
    )
    print("\n".join(said))
    kafka_db.wait_healthy(cluster, 180.0, topic=topic)
    ends = admin.end_offsets(cluster.bootstrap_servers(), topic, 1, timeout_s=30)
    assert ends[0] == MESSAGES  # every acknowledged write kept
    result = replica_verify.verify(cluster, topic, tmp_path)
    assert result["error"] is None and result["complete"], result
    [part] = result["partitions"]
    assert part["agree"] is True, part  # the follower fetched its lost tail again
    found = [r for r in result.get("corruptions", []) if r["node"] == node.name]
    assert found and found[0]["partition"] == 0, result.get("corruptions")


def test_the_sweep_after_a_crash_removes_the_ballast_and_restarts_the_broker(
    cluster: Cluster,
) -> None:
    node = cluster.nodes[0]
    rec = tmpfs_disk.records(cluster.backend_state)[node.name]
    op = FaultOp(9, "disk-full", 0.0, 1.0, [node.name])
    apply(cluster, op)  # as the runner does; then the harness "dies" without healing
    assert os.statvfs(rec["mount"]).f_bavail == 0
    wait_for(f"{node.name}'s broker to halt", lambda: not kafka_db.is_running(node), 120.0)
    done = heal_cluster(cluster)  # as `kafka-chaos heal` does after a SIGKILLed harness
    print(done)
    assert f"{node.name}: removed the disk-full ballast" in done
    assert f"{node.name}: restarted Kafka" in done
    assert not Path(rec["ballast"]).exists() and os.statvfs(rec["mount"]).f_bavail > 0
    assert kafka_db.is_running(node)
    kafka_db.wait_healthy(cluster, 180.0)


NAME = f"{SHARED_CLUSTER}-dfk"[:32]


def test_down_after_sigkill_leaves_no_tmpfs_mount(tmp_path: Path) -> None:
    with up_killed_once_kafka_starts(NAME, "tmpfs", tmp_path / "up.log") as root:
        saved = json.loads((root / "cluster.json").read_text())["backend_state"]
        [rec] = tmpfs_disk.records(saved).values()
        assert tmpfs_disk.is_mounted(rec["mount"]), "the harness died with the mount in place"
        pids = pids_from_files(root)
        result = down(NAME)
        assert result.returncode == 0, result.stdout + result.stderr
        assert lazyfs.mounted_below(str(root)) == []
        assert procs_mentioning(root) == []
        assert leftovers(NAME, saved["slot"], root, pids) == []
