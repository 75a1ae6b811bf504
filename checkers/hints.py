"""Settings of a run that explain or excuse a finding, in the report's words.

Why here: the same anomaly is a bug under one config and a documented
trade-off under another (acks=1 loses writes by design).  Each check's
record names the hints that apply to it (``Check.hints``), so a check is
declared in one place and the report (``reports.explanations.hints``) only
asks the record.  A hint reads config.json as written, which may be an older
or partial one: it looks at the sections it needs and says nothing otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka_chaos.checkers.spec_view import CheckedSpec

# config.json as written -> the sentences that apply (none: an empty list).
Hint = Callable[[dict[str, Any]], list[str]]


def _section(config: dict[str, Any], name: str) -> dict[str, Any]:
    return config.get(name) or {}


def _unclean(config: dict[str, Any]) -> bool:
    """Whether the run let an out-of-sync replica be elected, as the checks read it."""
    try:
        return CheckedSpec.of(config).unclean
    except Exception:  # an older or partial config.json: what its topic section says
        return bool(_section(config, "topic").get("unclean_leader_election"))


def loss_allowed(config: dict[str, Any]) -> list[str]:
    """acks below all, unclean election or min.insync.replicas=1 let Kafka lose acked writes."""
    out: list[str] = []
    acks = str(_section(config, "producer").get("acks", "all"))
    if acks in ("0", "1"):
        out.append(
            f"Allowed by acks={acks}: the leader acknowledges before followers have the "
            "message, so loss on leader failure is expected (the acks doc says so)."
        )
    if _unclean(config):
        out.append(
            "Allowed by unclean.leader.election.enable=true: Unclean leader election was "
            "enabled for the topic, so an out-of-sync replica may become leader and "
            "truncate acknowledged data; Kafka documents that it \u201cmay result in data "
            "loss\u201d."
        )
    if _section(config, "topic").get("min_insync_replicas") == 1:
        out.append("min.insync.replicas=1 lets a leader acknowledge alone with acks=all.")
    return out


def _idempotence_off(config: dict[str, Any]) -> bool:
    return not _section(config, "producer").get("enable_idempotence", True)


IDEMPOTENCE_OFF = "Idempotence was disabled: retried sends can be stored twice or reordered."


def idempotence_off(config: dict[str, Any]) -> list[str]:
    """Without idempotence a retried send may be stored twice or out of order."""
    return [IDEMPOTENCE_OFF] if _idempotence_off(config) else []


def unacked_duplicates_allowed(config: dict[str, Any]) -> list[str]:
    """Idempotence off, else the Java producer, whose promise ends with its session."""
    if _idempotence_off(config):
        return [IDEMPOTENCE_OFF]
    if _section(config, "producer").get("client") == "java":
        return [
            "Allowed by the Java producer: its javadoc promises idempotence within one "
            "session only, and after a send returns an error tells the application to check "
            "for a duplicate."
        ]
    return []


def subscribe_mode(config: dict[str, Any]) -> list[str]:
    """Rebalances move a subscribed consumer's positions back and forth."""
    if _section(config, "consumer").get("mode") == "subscribe":
        return [
            "Consumers ran in subscribe mode, where rebalances legitimately rewind or "
            "skip per-consumer offsets; this is usually a warning, not an error."
        ]
    return []


def read_uncommitted(config: dict[str, Any]) -> list[str]:
    """read_uncommitted consumers may return aborted and open transactions' messages."""
    if _section(config, "txn").get("isolation_level") == "read_uncommitted":
        return [
            "The run's consumers used read_uncommitted: they may return aborted and "
            "open transactions' messages (only the final drain reads committed data)."
        ]
    return []


def no_rewind(config: dict[str, Any]) -> list[str]:
    """Without the rewind an aborted transaction's inputs are never read again."""
    if _section(config, "txn").get("rewind") is False:
        return [
            "Rewinds after aborts were off (txn.rewind: false): a consumer keeps its "
            "position past an aborted transaction's inputs (KAFKA-17582)."
        ]
    return []


def auto_commit(config: dict[str, Any]) -> list[str]:
    """Auto-commit commits what was fetched, processed or not."""
    if _section(config, "consumer").get("commit") == "auto":
        return ["Auto-commit was on: it commits what was fetched, not what was processed."]
    return []
