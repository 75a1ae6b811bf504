"""Blackhole: clients' requests to one broker vanish for a while, then arrive late.

A partition or a pause is *refused* traffic: the client's requests fail and
it moves on.  Some bugs need traffic that is *delayed* instead (KAFKA-17754:
an EndTxn or a produce that lands after the client has given up on it and
started something else).  Without netem (this machine's kernel has none),
iptables gives that delay: DROP, never REJECT, the harness's packets to the
target broker's client port.  The client hears nothing, times out and
retries or closes the socket; its kernel keeps the unacknowledged bytes and
retransmits them, so when the rule goes the broker receives the abandoned
requests, late, and acts on them.

Only client traffic is dropped: replication between brokers, the controller
quorum and the harness's SSH (port 22) go on, so the fault heals on time.
The rules carry the partition rules' tag, so ``cluster down`` and the sweep
after a crash remove them like any partition rule.
"""

from __future__ import annotations

import shlex
from typing import Any

from harness.cluster import BROKER_PORT, Cluster
from harness.errors import ConfigError
from harness.node import Node
from nemeses import partition
from nemeses.base import NEMESIS_COMMAND_TIMEOUT_S, TARGETING_PARAMS, FaultOp
from nemeses.kinds import Model, NodeFault, Params

MODEL_HARNESS = "10.0.0.254"  # the harness's address on the property tests' model cluster


def drop_commands(harness: str, port: int, rule_tag: str) -> list[str]:
    """The rule on the target: the harness's TCP segments to ``port`` are dropped."""
    return [
        f"{partition.IPTABLES} -A INPUT -s {shlex.quote(harness)} -p tcp --dport {int(port)} "
        f"-m comment --comment {shlex.quote(rule_tag)} -j DROP"
    ]


class Blackhole(NodeFault):
    """Drop (never refuse) clients' requests to the target broker; ``params``: port."""

    name = "blackhole"
    targetable = True
    sweeps = (partition.RULES_SWEEP,)

    def params(self, params: Params, where: str = "fault") -> Params:
        unknown = sorted(set(params) - {"port", *TARGETING_PARAMS})
        if unknown:
            raise ConfigError(f"{where}: blackhole has no param(s) {unknown} (known: port)")
        port = params.get("port", BROKER_PORT)
        if not isinstance(port, int) or not 0 < port < 65536 or port == 22:
            raise ConfigError(f"{where}: blackhole port must be a TCP port other than 22")
        return params  # the default stays implicit: a schedule reads back as written

    def apply_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        rule_tag = partition.tag(cluster.name, op.id)
        rules = drop_commands(partition.harness_address(node), self._port(op), rule_tag)
        node.run(partition.install_once(rules, rule_tag), timeout=NEMESIS_COMMAND_TIMEOUT_S)

    def heal_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        partition.heal_node(node, partition.tag_matcher(cluster.name, op.id))

    def heal(self, cluster: Cluster, op: FaultOp, nodes: list[Node]) -> dict[str, Any] | None:
        super().heal(cluster, op, nodes)
        return {"port": self._port(op)}

    # On the model the fault is its rules, not a flag (NodeFault's): the rules' sweep
    # removes them after a crash, as it does on a real node.
    def model_start(self, model: Model, op: FaultOp) -> None:
        rule_tag = partition.tag(model.name, op.id)
        for node in op.targets:
            model.add_rules(node, drop_commands(MODEL_HARNESS, self._port(op), rule_tag))

    def model_end(self, model: Model, op: FaultOp) -> None:
        model.delete_rules(partition.tag_matcher(model.name, op.id))

    @staticmethod
    def _port(op: FaultOp) -> int:
        return int(op.params.get("port", BROKER_PORT))
