"""Netsplit: a whole cluster cut off from everything outside it, a data centre's outage.

The seed lab's "dc1 is experiencing a netsplit": every broker of the
cluster still reaches its peers (replication and the controller quorum go
on), but no client, no MirrorMaker and no other data centre reaches a
broker's client port.  Packets are dropped, never refused, as across a
broken WAN link: clients time out rather than fail fast.  Nothing outside
the cluster is touched, and the harness's SSH (port 22) stays open, so the
fault heals on time.

Rules: on every node, ACCEPT the cluster's own nodes on the client port,
then DROP everyone else there; both tagged like partition rules, so
``cluster down`` and the sweep after a crash remove them.
"""

from __future__ import annotations

import shlex
from typing import Any

from harness.cluster import BROKER_PORT, Cluster
from harness.errors import ConfigError
from harness.node import Node
from nemeses import partition
from nemeses.base import NEMESIS_COMMAND_TIMEOUT_S, FaultOp
from nemeses.kinds import Model, NodeFault, Params


def split_commands(peers: list[str], port: int, rule_tag: str) -> list[str]:
    """The rules on one node: its cluster's ``peers`` in, everyone else dropped at ``port``."""
    comment = f"-m comment --comment {shlex.quote(rule_tag)}"
    accept = [
        f"{partition.IPTABLES} -A INPUT -s {shlex.quote(p)} -p tcp --dport {int(port)} "
        f"{comment} -j ACCEPT"
        for p in peers
    ]
    return [*accept, f"{partition.IPTABLES} -A INPUT -p tcp --dport {int(port)} {comment} -j DROP"]


class Netsplit(NodeFault):
    """Every node of the cluster unreachable from outside it at once; ``params``: port."""

    name = "netsplit"
    shape = "every-node"
    sweeps = (partition.RULES_SWEEP,)

    def params(self, params: Params, where: str = "fault") -> Params:
        unknown = sorted(set(params) - {"port"})
        if unknown:
            raise ConfigError(f"{where}: netsplit has no param(s) {unknown} (known: port)")
        port = params.get("port", BROKER_PORT)
        if not isinstance(port, int) or not 0 < port < 65536 or port == 22:
            raise ConfigError(f"{where}: netsplit port must be a TCP port other than 22")
        return params

    def apply_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        rule_tag = partition.tag(cluster.name, op.id)
        peers = [n.address for n in cluster.nodes]
        rules = split_commands(peers, self._port(op), rule_tag)
        node.run(partition.install_once(rules, rule_tag), timeout=NEMESIS_COMMAND_TIMEOUT_S)

    def heal_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        partition.heal_node(node, partition.tag_matcher(cluster.name, op.id))

    def heal(self, cluster: Cluster, op: FaultOp, nodes: list[Node]) -> dict[str, Any] | None:
        super().heal(cluster, op, nodes)
        return {"port": self._port(op)}

    def model_start(self, model: Model, op: FaultOp) -> None:
        rule_tag = partition.tag(model.name, op.id)
        peers = [model.address(n) for n in model.names]
        for node in op.targets:
            model.add_rules(node, split_commands(peers, self._port(op), rule_tag))

    def model_end(self, model: Model, op: FaultOp) -> None:
        model.delete_rules(partition.tag_matcher(model.name, op.id))

    @staticmethod
    def _port(op: FaultOp) -> int:
        return int(op.params.get("port", BROKER_PORT))
