"""Plain-language explanations of each anomaly, for readers who are not Kafka experts.

Each check's record (checkers/catalog.py) says what the anomaly means and
what usually causes it, and names its hints (checkers/hints.py): settings of
*this* run that make the anomaly expected (e.g. acks=1), since the same
anomaly is a bug under one config and a documented trade-off under another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka_chaos.checkers import catalog


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


def hints(check: str, config: dict[str, Any]) -> list[str]:
    """Settings of this run that explain or excuse ``check``, from its record's
    hints (``Check.hints``); none for a check the catalog does not know."""
    found = catalog.find(check)
    return found.hints_for(config) if found is not None else []
