"""The banner's answer to the first question a user asks: what did Kafka lose?

From results.json's ``summary`` (checkers/results.py): acknowledged messages
lost, duplicated, and read out of order, each stated even when zero.
"""

from __future__ import annotations

from typing import Any

from kafka_chaos.reports.inputs import as_dict


def _n(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) else "?"


def answer(results: dict[str, Any]) -> str | None:
    """One or two sentences; None for results written before the summary existed."""
    s = as_dict(results.get("summary"))
    if not s:
        return None
    acked, lost = s.get("acked"), s.get("acked_lost")
    if lost is None:
        reason = as_dict(as_dict(results.get("checks")).get("acked-lost")).get("reason")
        first = f"Whether Kafka lost any of {_n(acked)} acknowledged messages could not be decided"
        first += f": {reason}." if reason else "."
    else:
        first = f"Kafka lost {_n(lost)} of {_n(acked)} acknowledged messages"
        severity = as_dict(as_dict(results.get("checks")).get("acked-lost")).get("severity")
        # A valid verdict beside a loss must not read as "nothing lost": say why it is legal.
        allowed = lost and severity == "warning"
        first += ", as this run's settings allow (a warning)." if allowed else "."
    dup, reordered = s.get("duplicated"), s.get("reordered")
    return (
        f"{first} {_n(dup)} {_were(dup)} duplicated; "
        f"{_n(reordered)} {_were(reordered)} read out of order."
    )


def _were(n: Any) -> str:
    return "was" if n == 1 else "were"
