"""Power loss: brokers crash and lose every write they never fsynced.

Why this is not ``kill``: a killed process leaves its writes in the page
cache, so a restarted broker still has them.  A power cut takes the page
cache too.  With broker data on lazyfs (``--disk lazyfs``) the writes a
broker did not fsync sit in lazyfs's cache; this fault SIGKILLs the brokers
of its targets (all at once: one correlated cut) and then drops each
node's unsynced writes (``lazyfs::clear-cache``) before anything restarts.
Heal starts them again, and Kafka recovers from what reached the disk.

Targets: one node (random, or the resolved leader/controller), a group
(``--targets minority`` or ``all``, drawn when the schedule is made), or
``--targets isr``: the in-sync replicas of the topic's busiest partition,
looked up when the fault starts (``targeting.isr_of``) and recorded in
``resolved``.
"""

from __future__ import annotations

from kafka_chaos.harness import lazyfs
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.fan_out import on_nodes
from kafka_chaos.harness.node import Node
from kafka_chaos.nemeses.base import (
    FAULT_STEP_TIMEOUT_S,
    NEMESIS_COMMAND_TIMEOUT_S,
    FaultOp,
    NemesisError,
)
from kafka_chaos.nemeses.kinds import NodeFault
from kafka_chaos.nemeses.process import STOPPED_SWEEP, ensure_running, kill

NAME = "power-loss"


def require_lazyfs(cluster: Cluster) -> dict[str, dict[str, str]]:
    """The cluster's lazyfs mounts by node; one line when its data is not on lazyfs."""
    mounts = lazyfs.records(cluster.backend_state)
    if cluster.backend_state.get("disk") != "lazyfs" or not mounts:
        raise ConfigError(
            f"{NAME} needs broker data on lazyfs: cluster {cluster.name!r} is on a plain disk "
            "(bring it up with --disk lazyfs)"
        )
    return mounts


def drop_unsynced(cluster: Cluster, node: Node) -> None:
    """Drop what ``node``'s broker wrote and never fsynced (its broker must be down)."""
    rec = require_lazyfs(cluster).get(node.name)
    if rec is None:
        raise NemesisError(f"{node.name}: no lazyfs mount recorded in cluster.json")
    res = node.run(lazyfs.clear_cache_script(rec), timeout=NEMESIS_COMMAND_TIMEOUT_S, check=False)
    if res.exit_code != 0:
        why = {4: "lazyfs did not confirm", 5: "its control FIFO took no command (lazyfs dead?)"}
        raise NemesisError(
            f"{node.name}: clearing lazyfs's cache failed ({why.get(res.exit_code, res.exit_code)})"
        )


class PowerLoss(NodeFault):
    """SIGKILL the targets' brokers, drop their unsynced writes; heal restarts them."""

    summary = (
        "The targets' brokers SIGKILLed at once and their unsynced writes dropped; needs "
        "`--disk lazyfs` (docs/power-loss.md)."
    )

    name = NAME
    flag = "down"
    targetable = True
    groupable = True
    sweeps = (STOPPED_SWEEP,)  # a harness that died mid-fault leaves brokers down

    def check_cluster(self, cluster: Cluster) -> None:
        require_lazyfs(cluster)  # refuse up front, never pretend

    def apply(self, cluster: Cluster, op: FaultOp, nodes: list[Node], topic: str | None) -> None:
        # Every target down first, then the caches: one cut, not one node after another.
        on_nodes(nodes, lambda n: kill(cluster, n), timeout_s=FAULT_STEP_TIMEOUT_S,
                 what=f"applying {op.f} (kill)").values()  # fmt: skip
        on_nodes(nodes, lambda n: drop_unsynced(cluster, n), timeout_s=FAULT_STEP_TIMEOUT_S,
                 what=f"applying {op.f} (clear-cache)").values()  # fmt: skip
        op.resolved = {**(op.resolved or {}), "unsynced_dropped": [n.name for n in nodes]}

    def apply_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        kill(cluster, node)
        drop_unsynced(cluster, node)

    def heal_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        ensure_running(cluster, node)
