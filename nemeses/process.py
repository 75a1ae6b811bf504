"""Process faults: kill, pause, clean restart, rolling restarts (and their kinds).

All signalling goes through the cluster's broker (``harness.broker``: pid
files verified against the node's root_dir, over SSH); nothing here matches
processes by name.  In ZooKeeper mode a kill takes the node's ZooKeeper down with its broker, as a
machine crash would, and a restart brings ZooKeeper back first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.node import Node
from kafka_chaos.nemeses.base import FaultOp, NemesisError
from kafka_chaos.nemeses.kinds import FaultKind, Model, NodeFault, Sweep

log = logging.getLogger(__name__)

BACK_IN_ISR_TIMEOUT_S = 120.0
ADMIN_TIMEOUT_S = 10.0


def _db(cluster: Cluster):  # noqa: ANN202 - imported late: the pure parts need no broker modules
    from kafka_chaos.harness import broker

    return broker.of(cluster)


def kill(cluster: Cluster, node: Node) -> None:
    """SIGKILL the broker (and ZooKeeper in zk mode): a crash, no clean shutdown."""
    _db(cluster).kill(cluster, node)


def ensure_running(cluster: Cluster, node: Node) -> bool:
    """Start whatever of this node's processes is down; True if anything was started."""
    return _db(cluster).ensure_running(cluster, node)


def pause(cluster: Cluster, node: Node) -> None:
    """SIGSTOP the broker: alive to the kernel, silent to everyone else."""
    _db(cluster).pause(cluster, node)


def resume(cluster: Cluster, node: Node) -> None:
    _db(cluster).resume(cluster, node)


def resume_all(cluster: Cluster, node: Node) -> None:
    """SIGCONT the broker and (zk mode) ZooKeeper; harmless if none is paused."""
    _db(cluster).resume(cluster, node)


def stop(cluster: Cluster, node: Node) -> None:
    """Clean shutdown (SIGTERM, wait, SIGKILL fallback inside the broker's stop)."""
    _db(cluster).stop(cluster, node)


def restart(cluster: Cluster, node: Node, hard: bool = False) -> None:
    """Bounce one broker: SIGTERM (clean) or SIGKILL (hard), then start it again."""
    db = _db(cluster)
    if hard:
        db.kill(cluster, node, whole_node=False)  # the broker alone, as before
    else:
        db.stop(cluster, node)
    db.ensure_running(cluster, node)


def rolling_restart(
    cluster: Cluster,
    order: Sequence[str],
    hard: bool,
    timeout_s: float = BACK_IN_ISR_TIMEOUT_S,
) -> list[dict[str, float]]:
    """Bounce every node in turn, each only once the previous is back in every ISR.

    Returns per node how long it took to rejoin, which the history records.
    """
    took = []
    for name in order:
        node = cluster.node(name)
        t0 = time.monotonic()
        restart(cluster, node, hard=hard)
        wait_back_in_isr(cluster, node, timeout_s)
        took.append({"node": name, "rejoin_s": round(time.monotonic() - t0, 3)})
    return took


def wait_back_in_isr(cluster: Cluster, node: Node, timeout_s: float) -> None:
    """Until the broker is registered and in the ISR of every partition it replicates."""
    from kafka_chaos.harness import admin

    bootstrap = cluster.bootstrap_servers()
    timeout_s *= cluster.time_scale  # a broker under emulation starts many times slower
    deadline = time.monotonic() + timeout_s
    last = "not checked yet"
    while time.monotonic() < deadline:
        try:
            if node.node_id not in admin.broker_ids(bootstrap, timeout_s=ADMIN_TIMEOUT_S):
                last = "not registered with the cluster"
            else:
                behind = [
                    f"{p.topic}-{p.partition}"
                    for p in admin.describe_topics(bootstrap, None, timeout_s=ADMIN_TIMEOUT_S)
                    if node.node_id in p.replicas and node.node_id not in p.isr
                ]
                if not behind:
                    return
                last = f"not in the ISR of {', '.join(behind[:5])}"
        except Exception as e:  # admin errors while the cluster settles are expected
            last = str(e)
        time.sleep(1.0)
    raise NemesisError(f"{node.name} did not rejoin within {timeout_s}s: {last}")


# --- the kinds ------------------------------------------------------------------------

# Last on each node: by then partitions and clocks are undone, so a broker
# started here starts on true time and reaches its peers.
PAUSED_SWEEP = Sweep(
    "paused processes",
    order=40,
    undo=lambda cluster, node, every_tag: resume_all(cluster, node),
    model=lambda model: model.clear("paused"),
)


def _ensure_if_configured(cluster: Cluster, node: Node) -> bool:
    """``ensure_running`` on a node that runs Kafka; a node without (MirrorMaker's) is left be."""
    if not _db(cluster).configured(node):
        return False
    return ensure_running(cluster, node)


STOPPED_SWEEP = Sweep(
    "stopped processes",
    order=50,
    undo=lambda cluster, node, every_tag: _ensure_if_configured(cluster, node),
    model=lambda model: model.clear("down"),
    done="restarted Kafka",
)


class ProcessFault(NodeFault):
    """The broker stopped one way when the fault starts (``act``) and set going
    again when it is healed (``undo``)."""

    targetable = True
    act: ClassVar[Callable[[Cluster, Node], object]]
    undo: ClassVar[Callable[[Cluster, Node], object]]

    def apply_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        self.act(cluster, node)

    def heal_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        self.undo(cluster, node)


class Kill(ProcessFault):
    """A crash; healed by starting whatever of the node is down."""

    summary = (
        "SIGKILL the broker (and ZooKeeper in zk mode): a crash, no clean shutdown; heal "
        "starts whatever of the node is down."
    )

    name, flag, sweeps = "kill", "down", (STOPPED_SWEEP,)
    act, undo = staticmethod(kill), staticmethod(ensure_running)
    groupable = True  # a minority or all at once: the crash without the power cut


class Pause(ProcessFault):
    """SIGSTOP: alive to the kernel, silent to everyone else, until SIGCONT."""

    summary = (
        "SIGSTOP the broker: alive to the kernel, silent to everyone else, until the "
        "heal's SIGCONT."
    )

    name, flag, sweeps = "pause", "paused", (PAUSED_SWEEP,)
    act, undo = staticmethod(pause), staticmethod(resume)


class KillAll(Kill):
    """Every target node crashes at once: a data centre's power cut (``kill-all`` of dc1).

    Healed like a kill, every node started again; generated with every node
    as its targets."""

    summary = (
        "Every target broker SIGKILLed at once: a data centre's power cut (`kill-all` of dc1)."
    )

    name = "kill-all"
    shape = "every-node"
    targetable = False
    groupable = False  # every node already


class Restart(Kill):
    """A clean stop, healed as a kill is."""

    summary = "A clean stop (SIGTERM, SIGKILL after a grace), healed as a kill is."

    name = "restart"
    act = staticmethod(stop)


class RollingRestart(FaultKind):
    """Every node bounced in turn; it is over (rejoined) when its apply returns."""

    summary = (
        "Every node bounced in turn with SIGTERM, each only once the previous one is back"
        " in every ISR."
    )

    name = "rolling-restart"
    shape = "every-node"
    hard: ClassVar[bool] = False
    sweeps = (STOPPED_SWEEP,)  # a harness that died mid-bounce leaves one broker down

    def apply(self, cluster: Cluster, op: FaultOp, nodes: list[Node], topic: str | None) -> None:
        rejoined = rolling_restart(cluster, op.targets, hard=self.hard)
        op.resolved = {**(op.resolved or {}), "rejoined": rejoined}  # an outcome, not a plan

    def heal(self, cluster: Cluster, op: FaultOp, nodes: list[Node]) -> dict[str, Any] | None:
        return None

    # the bounces rejoin within the start step: nothing lingers for the model
    def model_start(self, model: Model, op: FaultOp) -> None:
        pass

    def model_end(self, model: Model, op: FaultOp) -> None:
        pass


class HardRollingRestart(RollingRestart):
    summary = "A rolling restart whose bounces are SIGKILLs."
    name = "hard-rolling-restart"
    hard = True
