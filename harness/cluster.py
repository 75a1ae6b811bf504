"""The cluster handle shared by every layer, and where its state is kept.

A cluster's state (nodes, versions, backend details) is written to
``<KAFKA_CHAOS_HOME>/clusters/<name>/cluster.json`` as soon as it exists, so a
later ``cluster down`` - even after the harness was SIGKILLed - knows exactly
what to remove.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.node import Node

BROKER_PORT = 9092
CONTROLLER_PORT = 9093
ZOOKEEPER_PORT = 2181
# Backends whose nodes share one kernel clock.  `date -s` on one of their
# nodes would move every node (and the harness), so a node's clock is moved
# per JVM instead, with libfaketime (see ``Cluster.clock``).
SHARED_CLOCK_BACKENDS = ("local",)


def home() -> Path:
    """Root of harness-side state; override with ``KAFKA_CHAOS_HOME``."""
    return Path(os.environ.get("KAFKA_CHAOS_HOME", "/var/lib/kafka-chaos"))


def cluster_dir(name: str) -> Path:
    return home() / "clusters" / name


@dataclass
class Cluster:
    name: str
    backend: str  # local | vagrant | ssh
    nodes: list[Node]
    kafka_version: str
    mode: str  # kraft | zk
    backend_state: dict[str, Any] = field(default_factory=dict)  # backend-private details
    broker: str = "kafka"  # which implementation runs on the nodes (harness/broker.py)
    # Nodes that hold the brokers' shared state and run no broker (Tansu's
    # PostgreSQL): never a broker address, never a broker fault's target.
    storage: list[Node] = field(default_factory=list)

    @property
    def state_dir(self) -> Path:
        return cluster_dir(self.name)

    @property
    def clock(self) -> str:
        """How a clock fault moves a node's clock: ``faketime`` or ``system``.

        ``faketime``: the node's JVMs read their offset from a file
        (``kafka_config.faketime_file``) through libfaketime; ``system``: the
        node's own clock is set with ``date -s``.
        """
        return "faketime" if self.backend in SHARED_CLOCK_BACKENDS else "system"

    @property
    def time_scale(self) -> float:
        """How much slower than the host the slowest node runs (1.0: as fast).

        Cluster-wide waits (brokers healthy, a node back after a restart)
        stretch by it, as each node's own commands do by its own.
        """
        return max((n.time_scale for n in self.nodes), default=1.0)

    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.address}:{BROKER_PORT}" for n in self.nodes)

    def node(self, name_or_id: str | int) -> Node:
        for n in self.nodes:
            if n.name == name_or_id or n.node_id == name_or_id:
                return n
        raise HarnessError(f"cluster {self.name!r} has no node {name_or_id!r}")

    def node_by_address(self, address: str) -> Node:
        for n in self.nodes:
            if n.address == address:
                return n
        raise HarnessError(f"cluster {self.name!r} has no node at {address}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "backend": self.backend,
            "nodes": [n.to_dict() for n in self.nodes],
            "kafka_version": self.kafka_version,
            "mode": self.mode,
            "backend_state": self.backend_state,
            "broker": self.broker,
            "storage": [n.to_dict() for n in self.storage],
        }

    def save(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_dir / "cluster.json.tmp"
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        tmp.replace(self.state_dir / "cluster.json")

    @classmethod
    def load(cls, name: str) -> Cluster:
        path = cluster_dir(name) / "cluster.json"
        if not path.exists():
            raise HarnessError(
                f"no cluster named {name!r} (no {path}); run `kafka-chaos cluster up`"
            )
        data = json.loads(path.read_text())
        return cls(
            name=data["name"],
            backend=data["backend"],
            nodes=[Node.from_dict(n) for n in data["nodes"]],
            kafka_version=data["kafka_version"],
            mode=data["mode"],
            backend_state=data.get("backend_state", {}),
            broker=data.get("broker", "kafka"),
            storage=[Node.from_dict(n) for n in data.get("storage", [])],
        )

    def close(self) -> None:
        for n in [*self.nodes, *self.storage]:
            n.close()
