"""Disk full: a broker's only log directory stops taking writes (a real ENOSPC), then recovers.

Why this fault: Kafka handles a full disk unlike a crash.  An IOException
on a log directory takes that directory offline (LogDirFailureChannel), and
a broker whose every log directory is offline halts: Kafka 4.4's
LogManager logs "Shutdown broker because all log dirs in ... have failed"
and exits.  Here each node has one log directory, which also holds the
KRaft metadata log, so a full disk stops the whole broker.

How: the node's log directory is a size-limited tmpfs the harness made
(``--disk tmpfs``, harness/tmpfs_disk.py); the fault fills it to the last
byte with a ballast file, so the broker's next append fails with ENOSPC
from the kernel.  Heal reads what the broker said (its server.log since the
fault began), removes the ballast and starts the broker again if it
halted.  The history's end line has it all in ``resolved.disk_full``.
"""

from __future__ import annotations

import re
from shlex import quote
from typing import Any

from kafka_chaos.harness import tmpfs_disk
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.node import Node
from kafka_chaos.nemeses.base import NEMESIS_COMMAND_TIMEOUT_S, FaultOp, NemesisError
from kafka_chaos.nemeses.kinds import Model, NodeFault, Sweep
from kafka_chaos.nemeses.process import STOPPED_SWEEP, ensure_running

NAME = "disk-full"
FLAG = "disk-full"
# What Kafka logs when a write meets a full disk, and when it gives the directory up.
EVIDENCE = re.compile(
    r"No space left on device|have failed|Shutdown broker|offline log dir|is offline|"
    r"LogDirFailure|KafkaStorageException"
)
MAX_LINES = 5


def require_tmpfs(cluster: Cluster) -> dict[str, dict[str, Any]]:
    """The cluster's tmpfs mounts by node; one line when its data is elsewhere."""
    recs = tmpfs_disk.records(cluster.backend_state)
    if cluster.backend_state.get("disk") != "tmpfs" or not recs:
        disk = cluster.backend_state.get("disk", "plain")
        raise ConfigError(
            f"{NAME} needs broker data on a size-limited tmpfs: cluster {cluster.name!r} is on "
            f"a {disk} disk (bring it up with --disk tmpfs)"
        )
    return recs


def _rec(cluster: Cluster, node: Node) -> dict[str, Any]:
    rec = require_tmpfs(cluster).get(node.name)
    if rec is None:
        raise NemesisError(f"{node.name}: no tmpfs mount recorded in cluster.json")
    return rec


def _server_log(node: Node) -> str:
    return node.path("logs", "server.log")


def fill(cluster: Cluster, node: Node) -> dict[str, Any]:
    """Fill ``node``'s log directory; the ballast's size and where its server.log stood."""
    at = node.run(f"stat -c %s {quote(_server_log(node))} 2>/dev/null || echo 0",
                  timeout=NEMESIS_COMMAND_TIMEOUT_S, check=False).stdout.strip()  # fmt: skip
    res = node.run(
        tmpfs_disk.fill_script(_rec(cluster, node)), timeout=NEMESIS_COMMAND_TIMEOUT_S, check=False
    )
    words = res.stdout.split()
    if res.exit_code != 0 or len(words) != 2:
        raise NemesisError(
            f"{node.name}: filling the log directory failed (exit {res.exit_code}, "
            f"{(res.stderr or res.stdout).strip() or 'no output'})"
        )
    return {"ballast_bytes": int(words[0]), "free_bytes": int(words[1]),
            "server_log_from": int(at) if at.isdigit() else 0}  # fmt: skip


def broker_said(node: Node, from_byte: int) -> list[str]:
    """The broker's lines about the failed disk, written since byte ``from_byte`` of its log."""
    out = node.run(
        f"tail -c +{from_byte + 1} {quote(_server_log(node))} 2>/dev/null; true",
        timeout=NEMESIS_COMMAND_TIMEOUT_S,
        check=False,
    ).stdout
    hits = [line.strip()[:300] for line in out.splitlines() if EVIDENCE.search(line)]
    return hits[:MAX_LINES]


def empty(cluster: Cluster, node: Node) -> bool:
    """Remove the ballast; True if there was one."""
    recs = tmpfs_disk.records(cluster.backend_state)
    if node.name not in recs:
        return False
    res = node.run(tmpfs_disk.remove_script(recs[node.name]), timeout=NEMESIS_COMMAND_TIMEOUT_S)
    return res.stdout.strip() == "1"


def _sweep(cluster: Cluster, node: Node, every_tag: bool) -> bool:
    return empty(cluster, node)


# Before the stopped processes (50): a broker restarted on a full disk would halt again.
BALLAST_SWEEP = Sweep(
    "disk ballast",
    order=45,
    undo=_sweep,
    model=lambda model: model.clear(FLAG),
    done="removed the disk-full ballast",
)


class DiskFull(NodeFault):
    """Fill the target's log directory (ENOSPC); heal empties it and restarts a halted broker."""

    name = NAME
    summary = (
        "The target's only log directory filled to a real ENOSPC (needs `--disk tmpfs`): Kafka "
        "takes it offline and halts the broker; heal frees the space and restarts it."
    )
    flag = FLAG
    targetable = True
    sweeps = (BALLAST_SWEEP, STOPPED_SWEEP)  # the ballast, and a broker that halted

    def check_cluster(self, cluster: Cluster) -> None:
        require_tmpfs(cluster)  # refuse up front, never pretend

    def apply_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        filled = fill(cluster, node)
        resolved = op.resolved = dict(op.resolved or {})
        resolved.setdefault("disk_full", {})[node.name] = filled

    def heal_node(self, cluster: Cluster, node: Node, op: FaultOp) -> None:
        from kafka_chaos.harness import kafka_db

        resolved = op.resolved = dict(op.resolved or {})
        seen = resolved.setdefault("disk_full", {}).setdefault(node.name, {})
        if "broker_halted" not in seen:  # a retried heal keeps what the first one saw
            lines = broker_said(node, int(seen.get("server_log_from", 0)))
            seen.update(
                broker_halted=not kafka_db.is_running(node),
                enospc_seen=any("No space left on device" in x for x in lines),
                broker_lines=lines,
            )
        seen["ballast_removed"] = empty(cluster, node) or seen.get("ballast_removed", False)
        seen["restarted"] = ensure_running(cluster, node) or seen.get("restarted", False)

    def model_start(self, model: Model, op: FaultOp) -> None:
        model.mark(op.targets, FLAG)

    def model_end(self, model: Model, op: FaultOp) -> None:
        model.unmark(op.targets, FLAG)
