"""Checks every backend runs before handing a cluster to the Kafka layer.

A cluster is only usable when each node answers over SSH with its pinned
key, can open TCP connections to every other node (brokers must form a
quorum), and has the tools the Kafka layer and the nemeses rely on.
"""

from __future__ import annotations

import time

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import HarnessError, NodeUnreachable
from kafka_chaos.harness.fan_out import on_nodes
from kafka_chaos.harness.node import Node, quote

REQUIRED_TOOLS = ("java", "iptables", "bash")
# Backstop for one node's check: its commands (15 s; the mesh probe 10 s and
# 6 s a peer), tried up to three times on fresh connections, end within it.
CHECK_TIMEOUT_S = 180.0


def wait_reachable(cluster: Cluster, timeout_s: float) -> None:
    """Retry ``true`` on every node until it answers or ``timeout_s`` passes (daemons starting)."""
    deadline = time.monotonic() + timeout_s

    def wait(node: Node) -> None:
        while True:
            try:
                node.run("true", timeout=10)
                return
            except NodeUnreachable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    on_nodes(
        cluster.nodes, wait, timeout_s=timeout_s + CHECK_TIMEOUT_S, what="waiting for SSH"
    ).values()


def mesh_probe(addresses: list[str], port: int) -> str:
    """Shell that prints each address of ``addresses`` it cannot open ``port`` on."""
    targets = " ".join(quote(a) for a in addresses)
    return (
        f'for ip in {targets}; do timeout 5 bash -c "exec 3<>/dev/tcp/$ip/{port}" '
        '2>/dev/null || echo "$ip"; done'
    )


def check_mesh(cluster: Cluster, port: int = 22) -> None:
    """Every node opens a TCP connection to every other node's ``port``."""

    def probe(node: Node) -> None:
        others = [n.address for n in cluster.nodes if n is not node]
        if not others:
            return
        failed = node.run(mesh_probe(others, port), timeout=10 + 6 * len(others)).stdout.split()
        if failed:
            raise HarnessError(
                f"cluster {cluster.name}: {node.name} cannot reach {', '.join(failed)} on TCP "
                f"port {port} (firewall? for the local backend check `iptables -S FORWARD` "
                "and br_netfilter)"
            )

    on_nodes(
        cluster.nodes,
        probe,
        timeout_s=CHECK_TIMEOUT_S + 3 * 6 * len(cluster.nodes),
        what="checking the mesh",
    ).values()


def check_tools(cluster: Cluster, tools: tuple[str, ...] = REQUIRED_TOOLS) -> None:
    """Every node has ``tools`` on PATH; the error names the node and what is missing."""
    script = " ".join(f"command -v {t} >/dev/null || echo {t};" for t in tools)

    def probe(node: Node) -> None:
        missing = node.run(script, timeout=15).stdout.split()
        if missing:
            raise HarnessError(
                f"{node.name} ({node.ssh.host}) lacks {', '.join(missing)}; "
                "install openjdk-17-jre-headless, iptables and bash there"
            )

    on_nodes(cluster.nodes, probe, timeout_s=CHECK_TIMEOUT_S, what="checking tools").values()


def prepare_root_dirs(cluster: Cluster) -> None:
    """Create ``root_dir/{run,data,logs,config}`` on every (remote) node."""

    def prepare(node: Node) -> None:
        dirs = " ".join(quote(node.path(d)) for d in ("run", "data", "logs", "config"))
        node.run(f"mkdir -p {dirs}", timeout=15)

    on_nodes(
        cluster.nodes, prepare, timeout_s=CHECK_TIMEOUT_S, what="creating directories"
    ).values()
