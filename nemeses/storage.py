"""Faults on the storage node that a Tansu cluster's brokers share (its PostgreSQL).

Why: a stateless broker is only as good as the storage behind it, and that
storage is a part Apache Kafka has no equivalent of (docs/brokers.md).
``storage-kill`` crashes PostgreSQL (SIGKILL of the server and every one of
its processes), ``storage-pause`` SIGSTOPs them all, and
``storage-partition`` cuts the target brokers off from the storage node
(DROP both ways, the partition rules' tag, so the rules' sweep and ``cluster
down`` remove them).  The targets of a kill or a pause are every broker, as
every broker loses its storage; a partition's are the brokers cut off.

A heal restarts (or resumes) PostgreSQL, then starts any broker that died
while its storage was gone, and says which: what a broker does without its
storage is a finding, recorded in the heal's details, not hidden.
"""

from __future__ import annotations

import random
import time
from typing import Any

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.node import Node
from kafka_chaos.nemeses import partition
from kafka_chaos.nemeses.base import FaultOp, NemesisError
from kafka_chaos.nemeses.kinds import Ctx, FaultKind, Model, Params, Sweep
from kafka_chaos.nemeses.port_rules import PortRules

MODEL_STORAGE = "10.0.0.253"  # the storage node's address on the property tests' model cluster
PG_READY_TIMEOUT_S = 60.0


def _storage(cluster: Cluster) -> Node:
    if not cluster.storage:
        raise NemesisError(f"cluster {cluster.name!r} has no storage node (a Tansu cluster has)")
    return cluster.storage[0]


def _pg():  # noqa: ANN202 - imported late: the pure parts need no node modules
    from kafka_chaos.harness import postgres_db

    return postgres_db


def revive_storage(cluster: Cluster) -> bool:
    """PostgreSQL running and not paused, ready for clients; True if it was started."""
    from kafka_chaos.harness import services

    if not cluster.storage:
        return False
    pg, node = _pg(), _storage(cluster)
    if services.running(pg.POSTGRES, node):
        services.signal(pg.POSTGRES, node, "CONT")
        started = False
    else:
        started = pg.start(node)
    deadline = time.monotonic() + PG_READY_TIMEOUT_S * cluster.time_scale
    while not pg.ready(node):
        if time.monotonic() > deadline:
            raise NemesisError(f"{node.name}: PostgreSQL not ready {PG_READY_TIMEOUT_S:.0f} s on")
        time.sleep(0.5)
    return started


def _revive_brokers(cluster: Cluster) -> list[str]:
    """Start every broker that is down; the names of those it started."""
    from kafka_chaos.harness import broker

    impl = broker.of(cluster)
    return [n.name for n in cluster.nodes if impl.ensure_running(cluster, n)]


def _need_storage(cluster: Cluster, fault: str) -> None:
    if not cluster.storage:
        raise NemesisError(f"{fault} needs a storage node; cluster {cluster.name!r} has none")


STORAGE_SWEEP = Sweep(
    "storage node",
    order=39,  # before the brokers' own sweeps (40, 50): they need their storage
    undo=lambda cluster, node, every_tag: revive_storage(cluster),
    model=lambda model: model.clear("storage-down"),
    done="started PostgreSQL",
)


class StorageFault(FaultKind):
    """PostgreSQL stopped one way for every broker at once; healed by bringing it back."""

    shape = "every-node"
    flag = "storage-down"
    sweeps = (STORAGE_SWEEP,)
    signal_name = "KILL"

    def check_cluster(self, cluster: Cluster) -> None:
        _need_storage(cluster, self.name)

    def draw(self, rng: random.Random, ctx: Ctx) -> tuple[list[str], Params]:
        return sorted(ctx.nodes), {}  # every broker loses its storage; no order to draw

    def apply(self, cluster: Cluster, op: FaultOp, nodes: list[Node], topic: str | None) -> None:
        from kafka_chaos.harness import services

        if not services.signal(_pg().POSTGRES, _storage(cluster), self.signal_name):
            raise NemesisError(f"{_storage(cluster).name}: PostgreSQL was not running")

    def heal(self, cluster: Cluster, op: FaultOp, nodes: list[Node]) -> dict[str, Any] | None:
        revive_storage(cluster)
        return {"brokers_restarted": _revive_brokers(cluster)}

    def model_start(self, model: Model, op: FaultOp) -> None:
        model.mark(op.targets, self.flag)

    def model_end(self, model: Model, op: FaultOp) -> None:
        model.unmark(op.targets, self.flag)


class StorageKill(StorageFault):
    summary = (
        "SIGKILL the storage node's PostgreSQL and all its processes (Tansu clusters); heal "
        "restarts it, and any broker that died meanwhile."
    )
    name = "storage-kill"


class StoragePause(StorageFault):
    summary = (
        "SIGSTOP the storage node's PostgreSQL and all its processes (Tansu clusters), "
        "until the heal's SIGCONT."
    )
    name = "storage-pause"
    signal_name = "STOP"


class StoragePartition(PortRules):
    """The target brokers cut off from the storage node, both ways (Tansu clusters)."""

    summary = (
        "The target broker cut off from the storage node, every port, both ways "
        "(Tansu clusters); heal also starts any broker that died meanwhile."
    )
    name = "storage-partition"

    def check_cluster(self, cluster: Cluster) -> None:
        _need_storage(cluster, self.name)

    def rules(self, source: str | list[str], port: int, rule_tag: str) -> list[str]:
        return partition.drop_commands([str(source)], rule_tag)  # every port: a real cut

    def sources(self, cluster: Cluster, node: Node) -> str:
        return _storage(cluster).address

    def model_sources(self, model: Model, node: str) -> str:
        return MODEL_STORAGE

    def heal(self, cluster: Cluster, op: FaultOp, nodes: list[Any]) -> dict[str, Any] | None:
        super().heal(cluster, op, nodes)
        return {"brokers_restarted": _revive_brokers(cluster)}
