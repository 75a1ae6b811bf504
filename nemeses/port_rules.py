"""Faults that are iptables rules about one TCP port on each target (blackhole, netsplit).

Why a base: both install tagged rules on every target at once, heal by
deleting their own tag, validate the same ``port`` param, and model the
fault as its rules so the rules' sweep removes them after a crash, as it
does on a real node.  A kind says only which rules (``rules``).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from kafka_chaos.harness.cluster import BROKER_PORT, Cluster
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.nemeses import partition
from kafka_chaos.nemeses.base import NEMESIS_COMMAND_TIMEOUT_S, TARGETING_PARAMS, FaultOp
from kafka_chaos.nemeses.kinds import Model, NodeFault, Params


class PortRules(NodeFault):
    """Tagged rules about ``params["port"]`` (the client port by default) on each target."""

    sweeps = (partition.RULES_SWEEP,)

    @abstractmethod
    def rules(self, source: str | list[str], port: int, rule_tag: str) -> list[str]:
        """The rules on one target; ``source``: what ``sources`` gives for it."""

    @abstractmethod
    def sources(self, cluster: Cluster, node: Any) -> str | list[str]:
        """The addresses the target's rules name, on a real cluster."""

    @abstractmethod
    def model_sources(self, model: Model, node: str) -> str | list[str]:
        """The same on the property tests' model cluster."""

    def params(self, params: Params, where: str = "fault") -> Params:
        known = {"port", *TARGETING_PARAMS} if self.targetable else {"port"}
        unknown = sorted(set(params) - known)
        if unknown:
            raise ConfigError(f"{where}: {self.name} has no param(s) {unknown} (known: port)")
        port = params.get("port", BROKER_PORT)
        if not isinstance(port, int) or not 0 < port < 65536 or port == 22:
            raise ConfigError(f"{where}: {self.name} port must be a TCP port other than 22")
        return params  # the default stays implicit: a schedule reads back as written

    def apply_node(self, cluster: Cluster, node: Any, op: FaultOp) -> None:
        rule_tag = partition.tag(cluster.name, op.id)
        rules = self.rules(self.sources(cluster, node), self.port(op), rule_tag)
        node.run(partition.install_once(rules, rule_tag), timeout=NEMESIS_COMMAND_TIMEOUT_S)

    def heal_node(self, cluster: Cluster, node: Any, op: FaultOp) -> None:
        partition.heal_node(node, partition.tag_matcher(cluster.name, op.id))

    def heal(self, cluster: Cluster, op: FaultOp, nodes: list[Any]) -> dict[str, Any] | None:
        super().heal(cluster, op, nodes)
        return {"port": self.port(op)}

    def model_start(self, model: Model, op: FaultOp) -> None:
        rule_tag = partition.tag(model.name, op.id)
        for node in op.targets:
            model.add_rules(node, self.rules(self.model_sources(model, node), self.port(op),
                                             rule_tag))  # fmt: skip

    def model_end(self, model: Model, op: FaultOp) -> None:
        model.delete_rules(partition.tag_matcher(model.name, op.id))

    @staticmethod
    def port(op: FaultOp) -> int:
        return int(op.params.get("port", BROKER_PORT))
