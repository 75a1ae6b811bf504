"""Plain-language explanations of each anomaly, for readers who are not Kafka experts.

Each check's record (checkers/catalog.py) says what the anomaly means and
what usually causes it; ``hints`` then points at settings of *this* run that
make the anomaly expected (e.g. acks=1), since the same anomaly is a bug
under one config and a documented trade-off under another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checkers import catalog
from checkers.spec_view import CheckedSpec


@dataclass(frozen=True)
class Explanation:
    title: str
    meaning: str
    causes: str


def explain(check: str, fallback: str | None = None) -> Explanation:
    """The report's words for ``check``, from its record in the catalog; a check
    the catalog does not know (an older results.json's) falls back to the
    checker's own text."""
    found = catalog.find(check)
    if found is not None:
        return Explanation(found.title, found.meaning, found.causes)
    return Explanation(check, fallback or "No explanation is known for this check.", "")


@dataclass(frozen=True)
class Promise:
    """What a check holds Kafka or a client to, as the report shows it."""

    label: str  # "Promise", or why a check that is never an error is not
    promise: str
    source: str
    # Shown as text, not a link (the report loads nothing from elsewhere); None
    # unless https, since a results.json is input, not trusted markup.
    url: str | None
    allows: tuple[str, ...]


def promise(check: str, result: dict[str, Any]) -> Promise | None:
    """The basis of ``check``: from its results.json entry (the run's own record),
    else from its record in the catalog; None when neither names one."""
    known = catalog.find(check)
    raw = result.get("basis")
    if isinstance(raw, dict) and isinstance(raw.get("promise"), str):
        fields = {k: raw.get(k) for k in ("promise", "source", "url")}
        allows = tuple(str(a) for a in raw.get("allows") or () if isinstance(a, str))
    elif known is not None and known.basis is not None:
        b = known.basis
        fields = {"promise": b.promise, "source": b.source, "url": b.url}
        allows = b.allows
    else:
        return None
    url = fields["url"] if isinstance(fields["url"], str) else ""
    never = known is not None and not catalog.can_be_error(known)
    label = "Never an error, as its source says" if never else "Promise"
    return Promise(
        label,
        str(fields["promise"]),
        str(fields["source"] or ""),
        url if url.startswith("https://") else None,
        allows,
    )


def _unclean(config: dict[str, Any]) -> bool:
    """Whether the run let an out-of-sync replica be elected, as the checks read it."""
    try:
        return CheckedSpec.of(config).unclean
    except Exception:  # an older or partial config.json: what its topic section says
        return bool((config.get("topic") or {}).get("unclean_leader_election"))


def hints(check: str, config: dict[str, Any]) -> list[str]:
    """Settings of this run that explain or excuse ``check``."""
    producer = config.get("producer") or {}
    topic = config.get("topic") or {}
    consumer = config.get("consumer") or {}
    out: list[str] = []
    acks = str(producer.get("acks", "all"))
    if check in ("lost-write", "inconsistent-offsets", "unseen", "acked-lost"):
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
        if topic.get("min_insync_replicas") == 1:
            out.append("min.insync.replicas=1 lets a leader acknowledge alone with acks=all.")
    if check in ("duplicate", "duplicate-unacked", "nonmonotonic-send") and not producer.get(
        "enable_idempotence", True
    ):
        out.append("Idempotence was disabled: retried sends can be stored twice or reordered.")
    elif check == "duplicate-unacked" and producer.get("client") == "java":
        out.append(
            "Allowed by the Java producer: its javadoc promises idempotence within one "
            "session only, and after a send returns an error tells the application to check "
            "for a duplicate."
        )
    if check in ("nonmonotonic-poll", "poll-skip") and consumer.get("mode") == "subscribe":
        out.append(
            "Consumers ran in subscribe mode, where rebalances legitimately rewind or "
            "skip per-consumer offsets; this is usually a warning, not an error."
        )
    txn = config.get("txn") or {}
    uncommitted = txn.get("isolation_level") == "read_uncommitted"
    if check in ("aborted-read", "precommitted-read", "G1c-wr") and uncommitted:
        out.append(
            "The run's consumers used read_uncommitted: they may return aborted and "
            "open transactions' messages (only the final drain reads committed data)."
        )
    if check == "exactly-once" and txn.get("rewind") is False:
        out.append(
            "Rewinds after aborts were off (txn.rewind: false): a consumer keeps its "
            "position past an aborted transaction's inputs (KAFKA-17582)."
        )
    if check == "group-commit-past-unread" and consumer.get("commit") == "auto":
        out.append("Auto-commit was on: it commits what was fetched, not what was processed.")
    return out
