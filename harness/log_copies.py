"""Copies of a stopped broker's partition logs, taken before it rejoins.

Kafka's rejoin truncates a deposed leader's divergent tail, so a fault that
kills such a leader (``nemeses.unclean``) copies its log while it is down,
and replica verification (``forensics.replica_verify``) compares the copy
with the cluster's log afterwards.  Both sides meet at ``copies_dir``.
"""

from __future__ import annotations

from shlex import quote

from kafka_chaos.harness.node import Node

COPY_TIMEOUT_S = 60.0
CHECKPOINT = "replication-offset-checkpoint"  # the broker's high watermarks


def copies_dir(node: Node) -> str:
    """Where a node keeps copies of its logs taken before it rejoined."""
    return node.path("run", "before-rejoin")


def copy_before_rejoin(node: Node, topic: str, fault_id: int) -> str:
    """Copy the (stopped) broker's partitions of ``topic``; returns the copy's directory.

    Call it only while the broker is down: a live broker's segments change
    under ``cp``.  Kafka truncates a deposed leader's divergent tail as it
    rejoins, so this copy is the only place that tail survives.
    """
    dest = f"{copies_dir(node)}/fault-{fault_id}"
    data = node.path("data", "kafka")
    node.run(
        f"mkdir -p {quote(dest)} && for d in {quote(data)}/{quote(topic)}-*; do "
        f'[ -d "$d" ] && cp -a "$d" {quote(dest)}/; done; '
        f"cp -a {quote(data)}/{CHECKPOINT} {quote(dest)}/ 2>/dev/null; true",
        timeout=COPY_TIMEOUT_S,
    )
    return dest
