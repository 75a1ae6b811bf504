"""The local backend for real: namespaces, bridge, sshd, pinned keys, teardown.

No Kafka here (that is the teardown test's and the Kafka layer's job): this
module checks the nodes themselves, which takes seconds.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest
from _kafka_clusters import bare_cluster
from _local_leftovers import leftovers, pids_from_files
from kafka_chaos.harness import admin, backends
from kafka_chaos.harness.backends import local
from kafka_chaos.harness.backends.local_plan import LocalPlan
from kafka_chaos.harness.backends.ssh_inventory import load_inventory
from kafka_chaos.harness.backends.verify import check_mesh
from kafka_chaos.harness.cluster import cluster_dir
from kafka_chaos.harness.errors import HarnessError, NodeUnreachable
from kafka_chaos.harness.node import Node, SSHTarget
from kafka_chaos.harness.spec import ClusterSpec, TopicSpec

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
]

NAME = "a1"


@pytest.fixture(scope="module")
def cluster():
    with bare_cluster(NAME, nodes=3) as c:
        yield c


def test_every_node_answers_over_ssh_on_its_own_address(cluster) -> None:
    slot = cluster.backend_state["slot"]
    for i, node in enumerate(cluster.nodes, start=1):
        assert node.address == f"10.251.{slot}.{10 + i}"
        assert node.run("hostname", timeout=10).stdout.strip()
        addrs = node.run("ip -4 -o addr show dev eth0", timeout=10).stdout
        assert f"inet {node.address}/24" in addrs
        assert node.run("ip route show default", timeout=10).stdout.startswith(
            f"default via 10.251.{slot}.1"
        )
        for sub in ("run", "data", "logs", "config"):
            assert Path(node.root_dir, sub).is_dir()


def test_nodes_reach_each_other_over_tcp(cluster) -> None:
    check_mesh(cluster, port=22)
    n1, n2 = cluster.nodes[:2]
    # a real listener on n2, reached from n1 (not just sshd)
    n2.run(
        'nohup timeout 20 python3 -c "import socket; s=socket.socket(); '
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', 9999)); "
        "s.listen(); c, _ = s.accept(); c.sendall(b'pong')\" >/dev/null 2>&1 &",
        timeout=10,
    )
    got = n1.run(
        f"for i in $(seq 50); do r=$(timeout 2 bash -c 'exec 3<>/dev/tcp/{n2.address}/9999; "
        'cat <&3\' 2>/dev/null) && [ -n "$r" ] && echo $r && break; sleep 0.1; done',
        timeout=20,
    ).stdout
    assert got.strip() == "pong"


def test_host_keys_are_pinned(cluster, tmp_path: Path) -> None:
    node = cluster.nodes[0]
    other = cluster.nodes[1]
    known = Path(node.ssh.known_hosts).read_text().splitlines()
    assert len(known) == 3 and known[0].startswith(f"{node.address} ssh-ed25519 ")
    # n1's address with n2's host key: the connection must be refused
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"{node.address} {known[1].split(' ', 1)[1]}\n")
    impostor = Node(
        name="n1",
        node_id=1,
        address=node.address,
        ssh=SSHTarget(host=node.address, key_file=node.ssh.key_file, known_hosts=str(wrong)),
        root_dir=node.root_dir,
    )
    with pytest.raises(NodeUnreachable):
        impostor.run("true", timeout=10)
    assert other.run("true", timeout=10).ok


def test_guard_route_covers_the_subnet(cluster) -> None:
    slot = cluster.backend_state["slot"]
    routes = subprocess.run(
        ["ip", "route", "show", f"10.251.{slot}.0/24"], capture_output=True, text=True, check=True
    ).stdout
    assert f"unreachable 10.251.{slot}.0/24 metric 4000" in routes


def test_ssh_backend_drives_the_same_nodes_from_an_inventory(cluster, tmp_path: Path) -> None:
    """The ssh backend end to end, against real sshds (the local nodes)."""
    key = cluster.nodes[0].ssh.key_file
    inventory = tmp_path / "hosts.toml"
    inventory.write_text(
        "".join(f'[[hosts]]\nhost = "{n.address}"\nkey = "{key}"\n' for n in cluster.nodes)
    )
    assert len(load_inventory(inventory).hosts) == 3
    name = "a2"
    backends.destroy_cluster(name)
    remote = backends.create_cluster(
        ClusterSpec(name=name, backend="ssh", nodes=3, inventory=str(inventory))
    )
    try:
        pinned = Path(cluster_dir(name) / "known_hosts").read_text()
        assert pinned == Path(cluster.nodes[0].ssh.known_hosts).read_text()
        assert remote.nodes[2].run("test -d /var/lib/kafka-chaos/a2/run", timeout=10).ok
    finally:
        remote.close()
        removed = backends.destroy_cluster(name)
    assert "cluster dir" in removed[-1]
    assert not Path("/var/lib/kafka-chaos/a2").exists()
    assert not cluster_dir(name).exists()


def test_concurrent_ups_get_distinct_slots() -> None:
    names = ("a1x", "a2x")
    for n in names:
        backends.destroy_cluster(n)
    made, errors = {}, []

    def up(n: str) -> None:
        try:
            made[n] = backends.create_cluster(ClusterSpec(name=n, nodes=1))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=up, args=(n,)) for n in names]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors
        slots = {c.backend_state["slot"] for c in made.values()}
        assert len(slots) == 2
    finally:
        for c in made.values():
            c.close()
        for n in names:
            backends.destroy_cluster(n)


def test_destroy_removes_everything_and_is_idempotent() -> None:
    c = backends.create_cluster(ClusterSpec(name="a2", nodes=2))
    slot, root = c.backend_state["slot"], c.state_dir
    n1, n2 = c.nodes
    sleeper = "python3 -c 'import time; time.sleep(600)'"
    # a paused service with a pid file naming its root_dir, as a pause fault leaves it
    n1.run(
        f"nohup {sleeper} {n1.root_dir} >/dev/null 2>&1 & echo $! > {n1.root_dir}/run/svc.pid; "
        f"kill -STOP $(cat {n1.root_dir}/run/svc.pid)",
        timeout=10,
    )
    # a process whose pid file was never written (harness killed between spawn and write)
    n2.run(f"nohup {sleeper} >/dev/null 2>&1 &", timeout=10)
    c.close()
    pids = pids_from_files(root)
    assert len(pids) == 3  # two sshds and the paused service
    removed = backends.destroy_cluster("a2")
    svc = int((root / "nodes/n1/run/svc.pid").read_text()) if root.exists() else None
    assert svc is None  # the cluster dir went with everything else
    assert any("(svc.pid, SIGTERM)" in r for r in removed)
    assert any(f"in namespace kc{slot}-n2" in r for r in removed)
    assert removed[-1] == f"route unreachable 10.251.{slot}.0/24 metric 4000"
    assert leftovers("a2", slot, root, pids) == []
    assert backends.destroy_cluster("a2") == []
    out = subprocess.run(
        ["kafka-chaos", "cluster", "down", "--name", "a2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "nothing to remove" in out.stdout


def test_blocked_forwarding_is_opened_for_the_bridge_only_and_cleaned_up() -> None:
    """A host FORWARD rule dropping our bridged traffic (as Docker's would) gets a tagged
    ACCEPT for this bridge; teardown - here of a cluster that lost its cluster.json,
    found by its bridge alias - removes every tagged rule."""
    c = backends.create_cluster(ClusterSpec(name="a2", nodes=2))
    slot, root = c.backend_state["slot"], c.state_dir
    plan = LocalPlan.from_state(c.backend_state["plan"])
    try:
        if Path("/proc/sys/net/bridge/bridge-nf-call-iptables").read_text().strip() == "1":
            subprocess.run(
                ["iptables", "-I", "FORWARD", "-i", plan.bridge, "-o", plan.bridge]
                + ["-m", "comment", "--comment", "kafka-chaos:a2", "-j", "DROP"],
                check=True,
                timeout=20,
            )
            with pytest.raises(HarnessError, match="cannot reach"):
                check_mesh(c)
            local._ensure_mesh(c, plan)  # opens the bridge and re-checks
            rules = subprocess.run(
                ["iptables", "-S", "FORWARD"], capture_output=True, text=True, check=True
            ).stdout
            assert rules.count("kafka-chaos:a2") == 2
    finally:
        c.close()
    pids = pids_from_files(root)
    (root / "cluster.json").unlink()
    removed = backends.destroy_cluster("a2")
    assert f"bridge kcbr{slot}" in removed
    assert leftovers("a2", slot, root, pids) == []


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kafka-chaos", "cluster", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},  # rich tables unabridged
    )


def test_cli_up_reuses_a_healthy_cluster_and_recreates_a_broken_one() -> None:
    assert _cli("down", "--name", "a2").returncode == 0
    try:
        first = _cli("up", "--name", "a2", "--nodes", "2", "--no-kafka")
        assert first.returncode == 0, first.stderr
        assert "creating local cluster a2" in first.stdout
        again = _cli("up", "--name", "a2", "--nodes", "2", "--no-kafka")
        assert "reusing cluster a2" in again.stdout
        # n2's sshd dies (as after a reboot): the cluster must be rebuilt, not reused
        sshd = int((cluster_dir("a2") / "nodes/n2/run/sshd.pid").read_text())
        os.kill(sshd, 15)
        broken = _cli("up", "--name", "a2", "--nodes", "2", "--no-kafka")
        assert broken.returncode == 0, broken.stderr
        assert "nodes n2 do not answer over SSH" in broken.stdout
        status = _cli("status", "--name", "a2")
        assert status.returncode == 0 and status.stdout.count(" up ") == 2
        assert "sshd:" in status.stdout and "no live broker process" in status.stdout
    finally:
        down = _cli("down", "--name", "a2")
    assert down.returncode == 0 and "route unreachable" in down.stdout


def test_status_of_a_running_cluster(kafka_cluster) -> None:
    bootstrap = kafka_cluster.bootstrap_servers()
    topic = TopicSpec(name=f"status-{int(time.time())}", partitions=2)
    admin.create_topic(bootstrap, topic, timeout_s=60)
    try:
        out = _cli("status", "--name", kafka_cluster.name)
    finally:
        admin.delete_topic(bootstrap, topic.name, timeout_s=30)
    assert out.returncode == 0, out.stderr
    assert re.search(r"active controller: [1-3]\b", out.stdout), out.stdout
    assert len(re.findall(r"kafka:\d+", out.stdout)) == 3
    rows = [line for line in out.stdout.splitlines() if topic.name in line]
    assert len(rows) == 2 and all(re.search(r"\b[1-3],[1-3],[1-3]\b", r) for r in rows)
