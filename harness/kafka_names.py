"""The names a run gives its groups and transactions on the cluster.

Derived from the spec alone, so that the workloads that create them, the
nemeses that target their coordinators and the forensics that decode their
state after the run all agree without importing each other.
"""

from __future__ import annotations

from kafka_chaos.harness.spec import TestSpec


def group_name(spec: TestSpec, k: int) -> str:
    """Per-topic group names: topics are unique per run, so groups never carry over."""
    return f"{spec.topic.name}-g{k}"


def share_group_name(spec: TestSpec, k: int) -> str:
    """Per-topic share group names: a run's groups never carry state over."""
    return f"{spec.topic.name}-s{k}"


def transactional_id(topic: str, slot: int) -> str:
    """One id per worker slot: a new incarnation fences its predecessor and
    aborts whatever it left open, as an exactly-once application does."""
    return f"{topic}-tx{slot}"
