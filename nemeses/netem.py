"""Packet faults (delay, loss) with the netem qdisc, where the kernel has one; the kind.

Many kernels (this machine's among them) are built without ``sch_netem``.
Rather than inject nothing and let a run claim it tested packet loss, the
nemesis probes for netem on the node first and refuses with a clear error.
"""

from __future__ import annotations

import shlex
from typing import Any

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.fan_out import on_nodes
from kafka_chaos.harness.node import Node
from kafka_chaos.nemeses.base import FAULT_STEP_TIMEOUT_S, NEMESIS_COMMAND_TIMEOUT_S, FaultOp
from kafka_chaos.nemeses.kinds import NodeFault, Sweep

DEFAULT_DEVICE = "eth0"
PROBE_DEVICE = "kcnetem0"  # a throwaway dummy device: probing never touches real traffic


class NetemUnavailable(HarnessError):
    """The node's kernel cannot run the netem qdisc."""


def probe_command() -> str:
    """Exit 0 iff a netem qdisc can be added; it is removed again at once.

    It probes on a scratch dummy device when the kernel has those, else on
    the node's loopback for an instant (1 ms delay), never on its real link.
    """
    dev = PROBE_DEVICE
    return (
        f"if ip link add {dev} type dummy 2>/dev/null; then d={dev}; else d=lo; fi; "
        "tc qdisc add dev $d root netem delay 1ms; rc=$?; "
        "if [ $rc -eq 0 ]; then tc qdisc del dev $d root; fi; "
        f"if [ $d = {dev} ]; then ip link del {dev}; fi; exit $rc"
    )


def check_available(node: Node) -> None:
    res = node.run(probe_command(), timeout=NEMESIS_COMMAND_TIMEOUT_S, check=False)
    if not res.ok:
        raise NetemUnavailable(
            f"{node.name}: the kernel lacks the netem qdisc (`tc qdisc add ... netem` failed: "
            f"{(res.stderr or res.stdout).strip()[-200:] or 'exit ' + str(res.exit_code)}); "
            "packet delay/loss faults cannot be injected on this node"
        )


def netem_args(params: dict[str, Any]) -> str:
    """``delay 100ms 20ms loss 5%`` from {"delay_ms", "jitter_ms", "loss_pct"}."""
    parts = []
    if params.get("delay_ms"):
        parts.append(f"delay {float(params['delay_ms'])}ms")
        if params.get("jitter_ms"):
            parts.append(f"{float(params['jitter_ms'])}ms")
    if params.get("loss_pct"):
        parts.append(f"loss {float(params['loss_pct'])}%")
    return " ".join(parts) or "delay 100.0ms"


def start(cluster: Cluster, node: Node, params: dict[str, Any]) -> None:
    check_available(node)
    dev = shlex.quote(params.get("device", DEFAULT_DEVICE))
    node.run(
        f"tc qdisc replace dev {dev} root netem {netem_args(params)}",
        timeout=NEMESIS_COMMAND_TIMEOUT_S,
    )


def heal(cluster: Cluster, node: Node, params: dict[str, Any] | None = None) -> None:
    """Remove a root netem qdisc if there is one (leaves other qdiscs alone)."""
    dev = shlex.quote((params or {}).get("device", DEFAULT_DEVICE))
    node.run(
        f"tc qdisc show dev {dev} 2>/dev/null | grep -q 'qdisc netem' && "
        f"tc qdisc del dev {dev} root || true",
        timeout=NEMESIS_COMMAND_TIMEOUT_S,
        check=False,
    )


# After the rules, before clocks and processes (see ``partition.RULES_SWEEP``).
PACKET_SWEEP = Sweep(
    "packet faults",
    order=20,
    undo=lambda cluster, node, every_tag: heal(cluster, node),
    model=lambda model: model.clear("netem"),
)


class Netem(NodeFault):
    """Delay or loss on the node's link; ``params``: delay_ms, jitter_ms, loss_pct, device."""

    summary = (
        "Delay or loss on the node's link (tc netem); `params`: delay_ms, jitter_ms, "
        "loss_pct, device."
    )

    name = "netem"
    flag = "netem"
    sweeps = (PACKET_SWEEP,)

    def check_cluster(self, cluster: Cluster) -> None:
        on_nodes(  # refuse up front, never pretend
            cluster.nodes, check_available, timeout_s=FAULT_STEP_TIMEOUT_S, what="probing netem"
        ).values()

    def apply_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        start(cluster, node, op.params)

    def heal_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        heal(cluster, node, op.params)
