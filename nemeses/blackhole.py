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

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.node import Node
from kafka_chaos.nemeses import partition
from kafka_chaos.nemeses.kinds import Model
from kafka_chaos.nemeses.port_rules import PortRules

MODEL_HARNESS = "10.0.0.254"  # the harness's address on the property tests' model cluster


def drop_commands(harness: str, port: int, rule_tag: str) -> list[str]:
    """The rule on the target: the harness's TCP segments to ``port`` are dropped."""
    return [
        f"{partition.IPTABLES} -A INPUT -s {shlex.quote(harness)} -p tcp --dport {int(port)} "
        f"-m comment --comment {shlex.quote(rule_tag)} -j DROP"
    ]


class Blackhole(PortRules):
    """Drop (never refuse) clients' requests to the target broker; ``params``: port."""

    summary = (
        "Clients' packets to one broker DROPped (never refused), so requests arrive late "
        "after the heal; `params`: port."
    )

    name = "blackhole"
    targetable = True

    def rules(self, source: str | list[str], port: int, rule_tag: str) -> list[str]:
        return drop_commands(str(source), port, rule_tag)

    def sources(self, cluster: Cluster, node: Node) -> str:
        return partition.harness_address(node)

    def model_sources(self, model: Model, node: str) -> str:
        return MODEL_HARNESS
