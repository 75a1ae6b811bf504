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

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.node import Node
from kafka_chaos.nemeses import partition
from kafka_chaos.nemeses.kinds import Model
from kafka_chaos.nemeses.port_rules import PortRules


def split_commands(peers: list[str], port: int, rule_tag: str) -> list[str]:
    """The rules on one node: its cluster's ``peers`` in, everyone else dropped at ``port``."""
    comment = f"-m comment --comment {shlex.quote(rule_tag)}"
    accept = [
        f"{partition.IPTABLES} -A INPUT -s {shlex.quote(p)} -p tcp --dport {int(port)} "
        f"{comment} -j ACCEPT"
        for p in peers
    ]
    return [*accept, f"{partition.IPTABLES} -A INPUT -p tcp --dport {int(port)} {comment} -j DROP"]


class Netsplit(PortRules):
    """Every node of the cluster unreachable from outside it at once; ``params``: port."""

    summary = "The whole cluster unreachable from outside it at once; `params`: port."

    name = "netsplit"
    shape = "every-node"

    def rules(self, source: str | list[str], port: int, rule_tag: str) -> list[str]:
        return split_commands(list(source), port, rule_tag)

    def sources(self, cluster: Cluster, node: Node) -> list[str]:
        return [n.address for n in cluster.nodes]

    def model_sources(self, model: Model, node: str) -> list[str]:
        return [model.address(n) for n in model.names]
