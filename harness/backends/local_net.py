"""Network plumbing of the local backend: namespaces, veths, a bridge, routes.

Each function does one idempotent step with host tools (``ip``, ``iptables``)
so that creation can be resumed and teardown can be repeated after a crash.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from kafka_chaos.harness.backends.hostcmd import host_ok, host_run
from kafka_chaos.harness.backends.local_plan import LocalNodePlan, LocalPlan
from kafka_chaos.harness.errors import HarnessError


def namespaces() -> set[str]:
    out = host_run(["ip", "netns", "list"]).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def links() -> dict[str, dict]:
    """Root-namespace links by name (``ip -j -d link``), including their alias."""
    out = host_run(["ip", "-j", "-d", "link", "show"]).stdout
    return {link["ifname"]: link for link in json.loads(out or "[]")}


def route_lines() -> list[str]:
    lines = host_run(["ip", "route", "show", "table", "all"]).stdout.splitlines()
    return [line for line in lines if "10.251." in line]


def add_bridge(plan: LocalPlan) -> None:
    if plan.bridge not in links():
        host_run(["ip", "link", "add", plan.bridge, "type", "bridge", "stp_state", "0"])
    host_run(["ip", "link", "set", plan.bridge, "alias", plan.bridge_alias])
    host_run(["ip", "addr", "replace", f"{plan.gateway}/24", "dev", plan.bridge])
    host_run(["ip", "link", "set", plan.bridge, "up"])


def add_node_netns(plan: LocalPlan, node: LocalNodePlan) -> None:
    """Namespace + veth pair: host end on the bridge, peer as ``eth0`` inside."""
    if node.namespace not in namespaces():
        host_run(["ip", "netns", "add", node.namespace])
    ns = ["ip", "-n", node.namespace]
    host_run([*ns, "link", "set", "lo", "up"])
    if not host_ok([*ns, "link", "show", "eth0"]):
        if node.veth_host not in links():
            veth = ["ip", "link", "add", node.veth_host, "type", "veth"]
            host_run([*veth, "peer", "name", node.veth_peer])
        host_run(["ip", "link", "set", node.veth_peer, "netns", node.namespace])
        host_run([*ns, "link", "set", node.veth_peer, "name", "eth0"])
    host_run(["ip", "link", "set", node.veth_host, "master", plan.bridge, "up"])
    host_run([*ns, "addr", "replace", f"{node.address}/24", "dev", "eth0"])
    host_run([*ns, "link", "set", "eth0", "up"])
    host_run([*ns, "route", "replace", "default", "via", plan.gateway])


def add_leg(
    namespace: str, veth_host: str, veth_peer: str, ifname: str, bridge: str, address: str
) -> None:
    """A second interface for ``namespace``, on another cluster's ``bridge``.

    The node then reaches that cluster's nodes directly, on their subnet,
    without the host forwarding anything (``ip_forward`` stays as it is).
    Idempotent, like every step here; the pair goes with the namespace.
    """
    ns = ["ip", "-n", namespace]
    if not host_ok([*ns, "link", "show", ifname]):
        if veth_host not in links():
            host_run(["ip", "link", "add", veth_host, "type", "veth", "peer", "name", veth_peer])
        host_run(["ip", "link", "set", veth_peer, "netns", namespace])
        host_run([*ns, "link", "set", veth_peer, "name", ifname])
    host_run(["ip", "link", "set", veth_host, "master", bridge, "up"])
    host_run([*ns, "addr", "replace", f"{address}/24", "dev", ifname])
    host_run([*ns, "link", "set", ifname, "up"])


def namespace_pids(namespace: str) -> list[int]:
    proc = host_run(["ip", "netns", "pids", namespace], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def delete_namespace(namespace: str) -> bool:
    if namespace not in namespaces():
        return False
    host_run(["ip", "netns", "del", namespace])
    return True


def delete_link(name: str) -> bool:
    """Delete link ``name``; a veth may vanish meanwhile with its namespace (not an error)."""
    if name not in links():
        return False
    proc = host_run(["ip", "link", "del", name], check=False)
    if proc.returncode != 0 and name in links():
        raise HarnessError(f"`ip link del {name}` failed: {proc.stderr.strip()}")
    return proc.returncode == 0


def bridged_traffic_filtered() -> bool:
    """True when br_netfilter makes frames between our namespaces traverse the root FORWARD chain.

    Then a FORWARD policy or rule of the host (Docker installs both) can drop
    node-to-node traffic on our bridge.
    """
    flag = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
    return flag.exists() and flag.read_text().strip() == "1"


def allow_bridge_forward(plan: LocalPlan, tag: str) -> None:
    """Accept bridged traffic of this cluster only, tagged so teardown finds it."""
    host_run(
        ["iptables", "-I", "FORWARD", "-i", plan.bridge, "-o", plan.bridge]
        + ["-m", "comment", "--comment", tag, "-j", "ACCEPT"]
    )


def delete_tagged_rules(tag: str, bridge: str) -> list[str]:
    """Delete root-namespace iptables rules carrying comment ``tag`` and naming ``bridge``.

    Requiring the bridge too keeps a same-named cluster of another
    KAFKA_CHAOS_HOME (another slot, another bridge) safe.
    """
    removed = []
    for line in host_run(["iptables", "-S"]).stdout.splitlines():
        args = shlex.split(line)
        if line.startswith("-A ") and _has_comment(args, tag) and bridge in args:
            host_run(["iptables", "-D", *args[1:]])
            removed.append(f"iptables rule: {line}")
    return removed


def _has_comment(args: list[str], tag: str) -> bool:
    return any(
        a == "--comment" and i + 1 < len(args) and args[i + 1] == tag for i, a in enumerate(args)
    )
