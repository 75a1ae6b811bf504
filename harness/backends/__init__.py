"""Node backends: local network namespaces, Vagrant VMs, SSH inventory.

This facade is all the rest of the harness uses: it turns a ``ClusterSpec``
into a ``Cluster`` of SSH-reachable nodes (no Kafka yet) and removes it again.
Backends are imported lazily so that, say, the ssh backend works on a machine
without the local backend's kernel features.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import re
from types import ModuleType

from kafka_chaos.harness.cluster import Cluster, cluster_dir, home
from kafka_chaos.harness.errors import ConfigError, HarnessError
from kafka_chaos.harness.spec import ClusterSpec

log = logging.getLogger(__name__)

# backend name -> module with ``create(spec) -> Cluster`` and ``destroy(cluster) -> list[str]``
_MODULES = {"local": "local", "vagrant": "vagrant", "ssh": "ssh_inventory"}
BACKENDS = tuple(_MODULES)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
# remote root dirs are /var/lib/kafka-chaos/<name>, beside the harness's own clusters/
RESERVED_NAMES = {"clusters", "dist", "cache"}


def validate_name(name: str) -> None:
    """Cluster names become directory names and link aliases, so keep them plain."""
    if name in RESERVED_NAMES:
        raise ConfigError(f"cluster name {name!r} is reserved; pick another")
    if not _NAME.match(name or ""):
        raise ConfigError(
            f"cluster name {name!r} is invalid: use 1-32 letters, digits, '-' or '_', "
            "starting with a letter or digit"
        )


def cluster_exists(name: str) -> bool:
    return (cluster_dir(name) / "cluster.json").exists()


def create_cluster(spec: ClusterSpec) -> Cluster:
    """Provision the nodes of ``spec`` (no Kafka yet), save cluster.json, return the handle."""
    validate_name(spec.name)
    backend = _backend(spec.backend)
    if cluster_exists(spec.name):
        raise HarnessError(
            f"cluster {spec.name!r} already exists ({cluster_dir(spec.name)}); "
            f"remove it with `kafka-chaos cluster down --name {spec.name}`"
        )
    from kafka_chaos.harness import broker

    extra = broker.named(spec.broker).storage_nodes
    if not extra:
        return backend.create(spec)
    # The storage nodes are made, recorded and removed as the brokers' are
    # (the backend's plan holds every node), then set apart: no broker runs there.
    cluster = backend.create(dataclasses.replace(spec, nodes=spec.nodes + extra))
    cluster.nodes, cluster.storage = cluster.nodes[: spec.nodes], cluster.nodes[spec.nodes :]
    cluster.broker = spec.broker
    cluster.save()
    return cluster


def load_cluster(name: str) -> Cluster:
    return Cluster.load(name)


def why_not_reusable(cluster: Cluster, spec: ClusterSpec) -> str | None:
    """None when ``cluster`` can serve ``spec`` as it is; otherwise the reason (for a log line).

    A saved cluster can outlive its nodes (a reboot drops namespaces and
    sshds), so reuse needs every node to answer, not just a cluster.json.
    """
    from kafka_chaos.harness.backends.health import probe_nodes

    wanted = (spec.backend, spec.nodes, spec.kafka_version, spec.mode)
    have = (cluster.backend, len(cluster.nodes), cluster.kafka_version, cluster.mode)
    if wanted != have:
        return f"it is {have}, not {wanted} (backend, nodes, Kafka version, mode)"
    if cluster.broker != spec.broker:
        return f"it runs {cluster.broker}, not {spec.broker}"
    disk = cluster.backend_state.get("disk", "plain")
    if disk != spec.disk:
        return f"its broker data is on a {disk} disk, not {spec.disk}"
    if disk == "lazyfs":
        from kafka_chaos.harness import lazyfs

        mounts = lazyfs.records(cluster.backend_state)
        dead = [name for name, rec in mounts.items() if not lazyfs.alive(rec)]
        if dead:
            return f"the lazyfs mounts of {', '.join(dead)} are gone"
    if disk == "tmpfs":
        from kafka_chaos.harness import tmpfs_disk

        recs = tmpfs_disk.records(cluster.backend_state)
        gone = [name for name, rec in recs.items() if not tmpfs_disk.is_mounted(rec["mount"])]
        if gone:
            return f"the tmpfs mounts of {', '.join(gone)} are gone"
    down = [name for name, up in probe_nodes(cluster).items() if not up]
    if cluster.storage:
        from kafka_chaos.harness.fan_out import on_nodes

        probed = on_nodes(cluster.storage, lambda n: n.run("true", timeout=5), timeout_s=65,
                          what="probing SSH")  # fmt: skip
        down += [o.node.name for o in probed if not o.ok]
    if down:
        return f"nodes {', '.join(down)} do not answer over SSH"
    return None


def destroy_cluster(name: str) -> list[str]:
    """Remove cluster ``name``; idempotent. Returns what was removed (empty: nothing there)."""
    validate_name(name)
    if not cluster_exists(name):
        from kafka_chaos.harness.backends import local

        return local.destroy_orphan(name) if _can_probe_local() else []
    cluster = Cluster.load(name)
    try:
        return _backend(cluster.backend).destroy(cluster)
    finally:
        cluster.close()


def list_clusters() -> list[str]:
    """Names of the clusters with a cluster.json under KAFKA_CHAOS_HOME."""
    root = home() / "clusters"
    names = []
    for path in sorted(root.glob("*/cluster.json")):
        try:
            names.append(json.loads(path.read_text())["name"])
        except (OSError, json.JSONDecodeError, KeyError):
            names.append(path.parent.name)
    return names


def destroy_all() -> dict[str, list[str]]:
    """Destroy every cluster under KAFKA_CHAOS_HOME; one failure does not stop the rest."""
    results: dict[str, list[str]] = {}
    errors = []
    for name in list_clusters():
        try:
            results[name] = destroy_cluster(name)
        except HarnessError as e:
            errors.append(str(e))
    if errors:
        raise HarnessError("; ".join(errors))
    return results


def _backend(name: str) -> ModuleType:
    if name not in _MODULES:
        raise ConfigError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
    return importlib.import_module(f"kafka_chaos.harness.backends.{_MODULES[name]}")


def _can_probe_local() -> bool:
    return os.geteuid() == 0
