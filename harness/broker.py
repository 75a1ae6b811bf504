"""A broker implementation is a choice of the cluster: Apache Kafka or Tansu.

Why a protocol: the workloads, nemeses and checks speak the Kafka protocol
and need not care what answers it; what differs is how the brokers are
installed, configured, started and stopped, how their health is judged,
which faults make sense on them, where their state lives, and how that
state is read back as evidence.  Each implementation is one module
(``broker_kafka``: a thin wrapper over ``kafka_db``; ``broker_tansu``) whose
``BROKER`` satisfies ``Broker``; ``named`` and ``of`` find it.  What a
broker supports at the API level is asked of the broker itself, before a
run (``harness/api_versions.py``), never declared here.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Protocol

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.node import Node
from kafka_chaos.harness.spec import ClusterSpec, TestSpec

IMPLEMENTATIONS = {"kafka": "broker_kafka", "tansu": "broker_tansu"}
DEFAULT = "kafka"


class Broker(Protocol):
    """What the harness needs of a broker implementation."""

    name: str
    # Nodes the cluster needs beyond its brokers, for state they share
    # (Tansu: one PostgreSQL); they are made and removed with the cluster.
    storage_nodes: int
    # Why replica evidence from the brokers' own logs (DumpLogSegments) cannot
    # apply, or None when it can.
    no_replica_logs: str | None
    # Whether an active controller elects leaders (Kafka's); Tansu has none:
    # every broker is node 111 and leads every partition.
    has_controller: bool
    # Faults and target modes that make no sense here, each with its reason.
    refused_faults: dict[str, str]
    refused_targets: dict[str, str]
    # The faults a run gets when it names none.
    default_faults: tuple[str, ...]

    def label(self, cluster: Cluster) -> str:
        """What runs, in a few words, for ``cluster status``: product, version, mode."""

    def validate(self, spec: ClusterSpec) -> None:
        """Refuse, in one line, a cluster shape this implementation cannot run."""

    def start_cluster(self, cluster: Cluster, spec: ClusterSpec) -> None:
        """Install, configure and start everything (idempotent), then wait healthy."""

    def stop_cluster(self, cluster: Cluster, timeout_s: float) -> list[str]:
        """Stop every process of the cluster, best effort; the problems seen."""

    def wait_healthy(self, cluster: Cluster, timeout_s: float, topic: str | None = None) -> None:
        """Until every broker serves (and, with ``topic``, every partition has a leader)."""

    def kill(self, cluster: Cluster, node: Node, whole_node: bool = True) -> None:
        """SIGKILL the node's processes, a crash (``whole_node`` False: the broker alone)."""

    def stop(self, cluster: Cluster, node: Node) -> None:
        """A clean stop of the node's broker."""

    def ensure_running(self, cluster: Cluster, node: Node) -> bool:
        """Start whatever of the node is down; True when anything was started."""

    def configured(self, node: Node) -> bool:
        """Whether the node runs this broker at all (a MirrorMaker node does not)."""

    def pause(self, cluster: Cluster, node: Node) -> None:
        """SIGSTOP the node's broker."""

    def resume(self, cluster: Cluster, node: Node) -> None:
        """SIGCONT whatever of the node's broker processes is paused."""

    def is_running(self, node: Node) -> bool:
        """Whether the node's broker process lives (through its pid file)."""

    def collect_logs(self, node: Node, dest: Path) -> list[Path]:
        """Copy the node's logs and config into ``dest``."""

    def set_debug_loggers(self, cluster: Cluster, loggers: list[str]) -> None:
        """Put ``loggers`` at DEBUG on every broker, live (none: the plain config)."""

    def state_locations(self, cluster: Cluster) -> dict[str, str]:
        """Where the cluster's state lives: what, by node, at which path."""

    def evidence(self, cluster: Cluster, topic: str, run_dir: Path) -> dict[str, Any] | None:
        """What the broker's storage holds for ``topic`` after the heal, beside the
        acknowledged sends; None where the replicas' own logs are read instead."""


def named(name: str) -> Broker:
    """The implementation called ``name``; a ConfigError in one line for any other."""
    module = IMPLEMENTATIONS.get(name)
    if module is None:
        raise ConfigError(f"unknown broker {name!r} (known: {', '.join(IMPLEMENTATIONS)})")
    impl: Broker = importlib.import_module(f"kafka_chaos.harness.{module}").BROKER
    return impl


def of(cluster: Cluster) -> Broker:
    return named(cluster.broker)


def refusal(spec: TestSpec) -> str | None:
    """One line naming the first fault or target of ``spec`` its broker cannot take."""
    impl = named(spec.cluster.broker)
    scheduled = [op for op in spec.nemesis.schedule or [] if isinstance(op, dict)]
    faults = dict.fromkeys([*spec.nemesis.faults, *(op.get("f") for op in scheduled)])
    for fault in faults:
        if fault in impl.refused_faults:
            return f"{fault} does not apply to {impl.name}: {impl.refused_faults[fault]}"
    targets = dict.fromkeys([spec.nemesis.targets, *(op.get("target") for op in scheduled)])
    for target in targets:
        if target in impl.refused_targets:
            return f"{target} targets do not apply to {impl.name}: {impl.refused_targets[target]}"
    return None
