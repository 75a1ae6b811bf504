"""Checks every backend runs before handing a cluster to the Kafka layer.

A cluster is only usable when each node answers over SSH with its pinned
key, can open TCP connections to every other node (brokers must form a
quorum), and has the tools the Kafka layer and the nemeses rely on.
"""

from __future__ import annotations

import time

from harness.cluster import Cluster
from harness.errors import HarnessError, NodeUnreachable
from harness.node import quote

REQUIRED_TOOLS = ("java", "iptables", "bash")


def wait_reachable(cluster: Cluster, timeout_s: float) -> None:
    """Retry ``true`` on every node until it answers or ``timeout_s`` passes (daemons starting)."""
    deadline = time.monotonic() + timeout_s
    for node in cluster.nodes:
        while True:
            try:
                node.run("true", timeout=10)
                break
            except NodeUnreachable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)


def mesh_probe(addresses: list[str], port: int) -> str:
    """Shell that prints each address of ``addresses`` it cannot open ``port`` on."""
    targets = " ".join(quote(a) for a in addresses)
    return (
        f'for ip in {targets}; do timeout 5 bash -c "exec 3<>/dev/tcp/$ip/{port}" '
        '2>/dev/null || echo "$ip"; done'
    )


def check_mesh(cluster: Cluster, port: int = 22) -> None:
    """Every node opens a TCP connection to every other node's ``port``."""
    for node in cluster.nodes:
        others = [n.address for n in cluster.nodes if n is not node]
        if not others:
            continue
        failed = node.run(mesh_probe(others, port), timeout=10 + 6 * len(others)).stdout.split()
        if failed:
            raise HarnessError(
                f"cluster {cluster.name}: {node.name} cannot reach {', '.join(failed)} on TCP "
                f"port {port} (firewall? for the local backend check `iptables -S FORWARD` "
                "and br_netfilter)"
            )


def check_tools(cluster: Cluster, tools: tuple[str, ...] = REQUIRED_TOOLS) -> None:
    """Every node has ``tools`` on PATH; the error names the node and what is missing."""
    probe = " ".join(f"command -v {t} >/dev/null || echo {t};" for t in tools)
    for node in cluster.nodes:
        missing = node.run(probe, timeout=15).stdout.split()
        if missing:
            raise HarnessError(
                f"{node.name} ({node.ssh.host}) lacks {', '.join(missing)}; "
                "install openjdk-17-jre-headless, iptables and bash there"
            )


def prepare_root_dirs(cluster: Cluster) -> None:
    """Create ``root_dir/{run,data,logs,config}`` on every (remote) node."""
    for node in cluster.nodes:
        dirs = " ".join(quote(node.path(d)) for d in ("run", "data", "logs", "config"))
        node.run(f"mkdir -p {dirs}", timeout=15)
