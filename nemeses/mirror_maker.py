"""MirrorMaker faults: its JVM killed or paused, as a broker's is.

They act on the MirrorMaker node of a disaster-recovery pair
(``harness.mirror_pair``); the run schedules them with ``mirror.faults`` on
that node's own nemesis (``kafka_chaos.run``).  A kill heals by starting
MirrorMaker again, as an operator or a supervisor would; a pause by SIGCONT.
Signals go through the pid file (``harness.mirror_maker``), never by name.
"""

from __future__ import annotations

from harness.cluster import Cluster
from harness.node import Node
from nemeses.base import FaultOp
from nemeses.kinds import NodeFault, Sweep


def _mm():  # imported late: the pure parts of the nemeses need no Kafka modules
    from harness import mirror_maker

    return mirror_maker


def _start_if_configured(node: Node) -> bool:
    """Start MirrorMaker where a run configured it and it is down; nothing elsewhere."""
    mm = _mm()
    has = node.run(f"test -f {mm.MIRROR.launcher(node)}", timeout=15, check=False).exit_code == 0
    return has and mm.start(node)


MIRROR_PAUSED_SWEEP = Sweep(
    "paused MirrorMaker",
    order=41,
    undo=lambda cluster, node, every_tag: _mm().resume(node),
    model=lambda model: model.clear("mirror-paused"),
)
MIRROR_STOPPED_SWEEP = Sweep(
    "stopped MirrorMaker",
    order=51,
    undo=lambda cluster, node, every_tag: _start_if_configured(node),
    model=lambda model: model.clear("mirror-down"),
    done="restarted MirrorMaker",
)


class MirrorKill(NodeFault):
    """SIGKILL MirrorMaker: in-flight copies and uncommitted offsets are lost with it."""

    name, flag, sweeps = "mirror-kill", "mirror-down", (MIRROR_STOPPED_SWEEP,)

    def apply_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        _mm().kill(node)

    def heal_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        _mm().start(node)


class MirrorPause(NodeFault):
    """SIGSTOP MirrorMaker: its sessions and task leases time out while it stands still."""

    name, flag, sweeps = "mirror-pause", "mirror-paused", (MIRROR_PAUSED_SWEEP,)

    def apply_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        _mm().pause(node)

    def heal_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        _mm().resume(node)
