"""Apache Kafka as a ``harness.broker.Broker``: a thin wrapper over ``kafka_db``.

Why a wrapper and not a rewrite: ``kafka_db`` is Kafka's lifecycle, tested
on its own; this module only gives it the shape every implementation has,
so the run, the CLI and the nemeses ask the cluster's broker rather than
Kafka by name.  In ZooKeeper mode a node's ZooKeeper crashes, pauses and
restarts with its broker, as a machine would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka_chaos.harness import broker_debug, kafka_db
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.node import Node, quote
from kafka_chaos.harness.spec import ClusterSpec


class KafkaBroker:
    name = "kafka"
    storage_nodes = 0
    no_replica_logs = None  # each replica's log is read with DumpLogSegments
    has_controller = True  # the active controller (KRaft's, or ZooKeeper mode's)
    refused_faults = {
        f: "Apache Kafka has no storage node: its brokers keep their own logs"
        for f in ("storage-kill", "storage-pause", "storage-partition")
    }
    refused_targets: dict[str, str] = {}
    default_faults = ("kill", "partition")

    def label(self, cluster: Cluster) -> str:
        return f"Kafka {cluster.kafka_version} {cluster.mode}"

    def validate(self, spec: ClusterSpec) -> None:
        from kafka_chaos.harness import kafka_config

        kafka_config.validate(spec.kafka_version, spec.mode, spec.nodes, spec.broker_heap_mb)

    def start_cluster(self, cluster: Cluster, spec: ClusterSpec) -> None:
        kafka_db.start_cluster(cluster, spec)

    def stop_cluster(self, cluster: Cluster, timeout_s: float) -> list[str]:
        return kafka_db.stop_cluster(cluster, timeout_s=timeout_s)

    def wait_healthy(self, cluster: Cluster, timeout_s: float, topic: str | None = None) -> None:
        kafka_db.wait_healthy(cluster, timeout_s=timeout_s, topic=topic)

    def kill(self, cluster: Cluster, node: Node, whole_node: bool = True) -> None:
        kafka_db.kill(node)
        if whole_node and cluster.mode == "zk":
            kafka_db.kill_zookeeper(node)

    def stop(self, cluster: Cluster, node: Node) -> None:
        kafka_db.stop(node)

    def ensure_running(self, cluster: Cluster, node: Node) -> bool:
        started = cluster.mode == "zk" and kafka_db.start_zookeeper(node)
        return kafka_db.start(node) or started

    def configured(self, node: Node) -> bool:
        launcher = quote(kafka_db.KAFKA.launcher(node))
        return node.run(f"test -f {launcher}", timeout=15, check=False).exit_code == 0

    def pause(self, cluster: Cluster, node: Node) -> None:
        kafka_db.pause(node)

    def resume(self, cluster: Cluster, node: Node) -> None:
        kafka_db.resume(node)  # signals only a live process whose pid file names this node
        if cluster.mode == "zk":
            kafka_db.resume_zookeeper(node)

    def is_running(self, node: Node) -> bool:
        return kafka_db.is_running(node)

    def collect_logs(self, node: Node, dest: Path) -> list[Path]:
        return kafka_db.collect_logs(node, dest)

    def set_debug_loggers(self, cluster: Cluster, loggers: list[str]) -> None:
        broker_debug.set_loggers(cluster, loggers)  # none: a stale set restored

    def state_locations(self, cluster: Cluster) -> dict[str, str]:
        where = {n.name: n.path("data", "kafka") for n in cluster.nodes}
        if cluster.mode == "zk":
            where.update({f"{n.name} (zookeeper)": n.path("data", "zookeeper")
                          for n in cluster.nodes})  # fmt: skip
        return where

    def evidence(self, cluster: Cluster, topic: str, run_dir: Path) -> dict[str, Any] | None:
        return None  # the replicas' own logs are read by forensics/replica_verify.py


BROKER = KafkaBroker()
