"""Provisioning and teardown of machines the harness does not own (VMs, inventory hosts).

Provisioning only pins host keys, checks and prepares root_dir.  Teardown
works over SSH with the same rules as the local backend: only pids from our
pid files whose command line contains root_dir are signalled (SIGCONT, TERM,
then KILL), and only root_dir is deleted - the machine itself stays.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from kafka_chaos.harness.backends import keys, verify
from kafka_chaos.harness.backends.health import owned_test
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.node import Node, quote
from kafka_chaos.harness.spec import ClusterSpec

log = logging.getLogger(__name__)

TEARDOWN_TIMEOUT_S = 60.0


def teardown_script(root_dir: str) -> str:
    """Shell: stop our pid-file processes (CONT, TERM, KILL after 10 s), remove root_dir."""
    root = quote(root_dir)
    return (
        f'pids=; for f in {root}/run/*.pid; do [ -e "$f" ] || continue; p=$(cat "$f"); '
        f'if {owned_test(root_dir, "$p")}; then pids="$pids $p"; fi; done; '
        'if [ -n "$pids" ]; then kill -CONT $pids; kill -TERM $pids; '
        # a zombie counts as gone: its parent, not us, has to reap it
        "for i in $(seq 100); do live=; for p in $pids; do kill -0 $p 2>/dev/null && "
        "! grep -q '^State:[[:space:]]*Z' /proc/$p/status 2>/dev/null && "
        'live="$live $p"; done; [ -z "$live" ] && break; sleep 0.1; done; '
        '[ -n "$live" ] && kill -KILL $live; echo "stopped:$pids"; fi; '
        f"rm -rf {root}"
    )


def provision(
    spec: ClusterSpec, nodes: list[Node], pin_to: str | None, state: dict[str, Any]
) -> Cluster:
    """Save cluster.json, pin host keys into ``pin_to`` (if given), prepare and verify nodes."""
    cluster = Cluster(
        name=spec.name,
        backend=spec.backend,
        nodes=nodes,
        kafka_version=spec.kafka_version,
        mode=spec.mode,
        backend_state=state,
    )
    cluster.save()
    try:
        if pin_to:
            keys.pin_nodes(nodes, Path(pin_to))
        verify.wait_reachable(cluster, timeout_s=30)
        verify.check_tools(cluster)
        verify.prepare_root_dirs(cluster)
        verify.check_mesh(cluster)
    except BaseException:
        cluster.close()
        shutil.rmtree(cluster.state_dir, ignore_errors=True)
        raise
    log.info("cluster %s: %d %s nodes ready", spec.name, len(nodes), spec.backend)
    return cluster


def teardown(cluster: Cluster) -> list[str]:
    """Clean every node, then forget the cluster (its state dir)."""
    removed = teardown_nodes(cluster)
    cluster.close()
    shutil.rmtree(cluster.state_dir, ignore_errors=True)
    removed.append(f"cluster dir {cluster.state_dir}")
    return removed


def teardown_nodes(cluster: Cluster) -> list[str]:
    """Stop our processes and remove root_dir on every node; report per node."""
    removed, errors = [], []
    for node in cluster.nodes:
        try:
            removed.extend(_teardown_node(node))
        except HarnessError as e:
            errors.append(f"{node.name}: {e}")
    if errors:
        raise HarnessError(
            f"cluster {cluster.name}: could not clean {'; '.join(errors)}; "
            "fix the hosts and rerun `cluster down`"
        )
    return removed


def _teardown_node(node: Node) -> list[str]:
    if "kafka-chaos" not in node.root_dir or node.root_dir.rstrip("/").count("/") < 3:
        raise HarnessError(f"refusing to remove {node.root_dir!r}: not a kafka-chaos directory")
    out = node.run(teardown_script(node.root_dir), timeout=TEARDOWN_TIMEOUT_S).stdout
    removed = [
        f"{node.name}: process {pid}"
        for line in out.splitlines()
        if line.startswith("stopped:")
        for pid in line.removeprefix("stopped:").split()
    ]
    removed.append(f"{node.name}: {node.root_dir}")
    return removed
