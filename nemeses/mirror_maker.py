"""MirrorMaker faults: its JVM killed or paused, as a broker's is.

They act on the MirrorMaker node of a disaster-recovery pair
(``harness.mirror_pair``); the run schedules them with ``mirror.faults`` on
that node's own nemesis (``kafka_chaos.run``).  A kill heals by starting
MirrorMaker again, as an operator or a supervisor would; a pause by SIGCONT.
Signals go through the pid file (``harness.mirror_maker``), never by name.
"""

from __future__ import annotations

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.node import Node
from kafka_chaos.nemeses.base import FaultOp
from kafka_chaos.nemeses.kinds import NodeFault, Sweep


def _mm():  # imported late: the pure parts of the nemeses need no Kafka modules
    from kafka_chaos.harness import mirror_maker

    return mirror_maker


def _killed_marker(node: Node) -> str:
    """Present while a mirror-kill fault holds MirrorMaker down: what the sweep undoes."""
    return node.path("run", "mirrormaker.killed-by-fault")


def _kill(node: Node) -> None:
    node.run(f"touch {_killed_marker(node)}", timeout=15)
    _mm().kill(node)


def _revive(node: Node) -> bool:
    """Start MirrorMaker again if a fault killed it (the marker says so); nothing else.

    A MirrorMaker a run stopped at its end stays stopped: the next mirror run
    starts its own.
    """
    marker = _killed_marker(node)
    if node.run(f"test -f {marker}", timeout=15, check=False).exit_code != 0:
        return False
    started = _mm().start(node)
    node.run(f"rm -f {marker}", timeout=15)
    return started


MIRROR_PAUSED_SWEEP = Sweep(
    "paused MirrorMaker",
    order=41,
    undo=lambda cluster, node, every_tag: _mm().resume(node),
    model=lambda model: model.clear("mirror-paused"),
)
MIRROR_STOPPED_SWEEP = Sweep(
    "stopped MirrorMaker",
    order=51,
    undo=lambda cluster, node, every_tag: _revive(node),
    model=lambda model: model.clear("mirror-down"),
    done="restarted MirrorMaker",
)


class MirrorKill(NodeFault):
    """SIGKILL MirrorMaker: in-flight copies and uncommitted offsets are lost with it."""

    summary = "SIGKILL MirrorMaker: in-flight copies and uncommitted offsets are lost with it."

    name, flag, sweeps = "mirror-kill", "mirror-down", (MIRROR_STOPPED_SWEEP,)

    def apply_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        _kill(node)

    def heal_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        _revive(node)


class MirrorPause(NodeFault):
    """SIGSTOP MirrorMaker: its sessions and task leases time out while it stands still."""

    summary = "SIGSTOP MirrorMaker: its sessions and task leases time out while it stands still."

    name, flag, sweeps = "mirror-pause", "mirror-paused", (MIRROR_PAUSED_SWEEP,)

    def apply_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        _mm().pause(node)

    def heal_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        _mm().resume(node)
