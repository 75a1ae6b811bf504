"""Validity and the verdict: turning each check's count into results.json.

A check's severity comes from its record (checkers/check.py) and the run's
settings, because the same observation can be a broken promise or legal
behaviour: a duplicate is an error only when the producer promised
idempotence.  Only severity "error" counts against the verdict.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_chaos.checkers.check import Basis


def check_result(
    explanation: str,
    count: int,
    severity: str,
    examples: list,
    valid: Any = None,
    basis: Basis | None = None,
) -> dict[str, Any]:
    """One check's entry in results.json; ``valid`` None: valid when nothing was found.

    ``basis`` (``checkers.check.Basis``) goes in as the promise the check holds
    Kafka to, so a reader of the file alone can weigh a finding against its source.
    """
    return {
        "valid": (count == 0) if valid is None else valid,
        "count": count,
        "severity": severity,
        "explanation": explanation,
        "basis": basis_entry(basis),
        "examples": examples,
    }


def basis_entry(basis: Basis | None) -> dict[str, Any] | None:
    """A ``Basis`` as results.json holds it; None for a check that records none."""
    if basis is None:
        return None
    return {
        "promise": basis.promise,
        "source": basis.source,
        "url": basis.url,
        "allows": list(basis.allows),
    }


def build_checks(
    checks: Iterable[Any], spec: Any, found: dict[str, tuple[int, list]], proven: bool
) -> dict[str, dict[str, Any]]:
    """Every check's result in one history, from its record (``checkers.check.Check``)
    under the run's settings ``spec``.  ``found``: {check: (count, examples)};
    ``proven``: the final drain read everything, so a value it did not read is
    gone (``Check.needs_drain``)."""
    out = {}
    for c in checks:
        n, examples = found.get(c.name, (0, []))
        valid = unseen_validity(n, proven) if c.needs_drain else None
        out[c.name] = check_result(c.explanation, n, c.severity(spec), examples, valid, c.basis)
    return out


@dataclass
class LossTally:
    """Acknowledged values missing from the final drain that ``acked-lost`` did not
    count as lost (checkers/queue/loss_checks.py, the reference's twin)."""

    excused: int = 0  # below the log start: removed by retention
    undecided: int = 0  # the drain did not prove it read their partition to the end
    unproven: tuple[str, ...] = ()  # those partitions, as "topic-partition"
    # Of ``undecided``: acked without an offset (workloads/delivery_offsets.py), never
    # read, in a partition whose log start is above 0: removed or lost, no offset says.
    unplaced: int = 0

    @classmethod
    def of(cls, check: dict[str, Any]) -> LossTally:
        """The tally an ``acked-lost`` result was built from (``acked_lost_result``)."""
        return cls(
            check.get("excused_retention", 0),
            check.get("undecided", 0),
            tuple(check.get("unproven_partitions", ())),
            check.get("undecided_unplaced", 0),
        )


def acked_lost_result(check: dict[str, Any], tally: LossTally, final_drain: bool) -> None:
    """``acked-lost``'s validity and reason, in place: invalid on any loss, unknown
    while acknowledged values are missing where the drain proves nothing."""
    check["excused_retention"] = tally.excused
    check["undecided"] = tally.undecided
    check["unproven_partitions"] = list(tally.unproven)
    check["undecided_unplaced"] = tally.unplaced
    check["reason"] = None
    if check["count"] or not tally.undecided:
        check["valid"] = check["count"] == 0
        return
    check["valid"] = "unknown"
    if not final_drain:
        check["reason"] = (
            f"no final drain ran: {tally.undecided} acknowledged value(s) cannot be shown "
            "to be in the log or gone from it"
        )
    else:
        said = []
        if tally.undecided > tally.unplaced:
            where = ", ".join(tally.unproven) or "the partition(s) of sends without a known offset"
            said.append(
                f"{tally.undecided - tally.unplaced} acknowledged value(s) are absent from a final"
                f" drain that did not prove it read {where} up to the high watermark"
            )
        if tally.unplaced:
            said.append(
                f"{tally.unplaced} acknowledged value(s) without an offset, never read, are "
                "absent from a partition whose log start is above 0: removed by retention or "
                "lost, which cannot be told"
            )
        check["reason"] = "; ".join(said)


def summary(checks: dict[str, dict[str, Any]], evidence: dict[str, int]) -> dict[str, Any]:
    """The answer a user asks for first (results.json ``summary``): acknowledged
    messages, how many are lost (null when unknown), duplicated, read out of order."""
    lost = checks.get("acked-lost", {})

    def count(*names: str) -> int:
        return sum(checks[n]["count"] for n in names if n in checks)

    return {
        "acked": evidence.get("acked_sends", 0),
        "acked_lost": None if lost.get("valid") == "unknown" else lost.get("count"),
        "duplicated": count("duplicate", "duplicate-unacked"),
        "reordered": count("nonmonotonic-poll", "int-nonmonotonic-poll"),
    }


def unseen_validity(count: int, final_drain: bool) -> bool | str:
    """Unseen data is only proof of loss once a final drain tried to read everything."""
    if count == 0:
        return True
    return False if final_drain else "unknown"


# Why a history cannot support a verdict of valid, whatever its checks say.
# Keys are stable codes (the tests use them); values are read by people.
NOTHING_ACKED = "nothing-acked"
NOTHING_READ = "nothing-read"
FAULTS_FAILED = "faults-failed"


def evidence_gaps(evidence: dict[str, int]) -> list[str]:
    """Codes of what ``evidence`` (acked_sends, read_offsets, faults, failed_faults)
    lacks for a valid verdict to mean anything.

    No ack: nothing was promised, so nothing can have been broken.  Nothing
    read: no write can be shown to have survived.  Every fault failed to
    start: the run never tested what it set out to.  A history without fault
    lines planned none, as far as the checker can tell (the config alone does
    not say whether the schedule had room for one, and a bare history is
    checked under the default config).
    """
    gaps = []
    if evidence["acked_sends"] == 0:
        gaps.append(NOTHING_ACKED)
    if evidence["read_offsets"] == 0:
        gaps.append(NOTHING_READ)
    if evidence["faults"] > 0 and evidence["failed_faults"] == evidence["faults"]:
        gaps.append(FAULTS_FAILED)
    return gaps


def unknown_reasons(checks: dict[str, dict[str, Any]], evidence: dict[str, int]) -> list[str]:
    """Plain sentences for results.json's ``unknown_reasons``: every reason the
    verdict cannot be valid short of an error-severity anomaly."""
    reasons = []
    for gap in evidence_gaps(evidence):
        if gap == NOTHING_ACKED:
            reasons.append(
                "no send was acknowledged: without an acknowledged write nothing was "
                "promised, so a clean history proves nothing"
            )
        elif gap == NOTHING_READ:
            reasons.append(
                "nothing was read (no poll, not even a final drain, returned a record): "
                "no write can be shown to have survived"
            )
        elif gap == FAULTS_FAILED:
            n = evidence["faults"]
            reasons.append(
                f"all {n} fault(s) failed to take effect (each carries an error): "
                "the run never tested the faults it planned"
            )
    # Checks undecided for one shared reason (the cycle checks when Elle is
    # missing) make one line naming them all, not one line each.
    by_reason: dict[str, list[str]] = {}
    for name in sorted(n for n, c in checks.items() if c["valid"] == "unknown"):
        by_reason.setdefault(_undecided_reason(name, checks[name]), []).append(name)
    reasons.extend(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())
    return reasons


def _undecided_reason(name: str, check: dict[str, Any]) -> str:
    if name == "unseen":
        return (
            f"{check['count']} acknowledged value(s) never read and no complete final drain "
            "to prove them gone"
        )
    if name == "exactly-once":
        return (
            f"{check['count']} input(s) not seen exactly once in the output and no final "
            "drain to prove it"
        )
    return check.get("reason") or "the check could not decide"


def verdict(checks: dict[str, dict[str, Any]], reasons: list[str] | tuple[str, ...] = ()) -> str:
    """invalid > unknown > valid, as in Jepsen: an error-severity anomaly is proof
    whatever else is missing; short of one, any ``reasons`` (``unknown_reasons``)
    or undecided check leaves the verdict unknown."""
    if any(c["severity"] == "error" and c["valid"] is False for c in checks.values()):
        return "invalid"
    if reasons or any(c["valid"] == "unknown" for c in checks.values()):
        return "unknown"
    return "valid"


def write_results(results: dict[str, Any], out: Path) -> None:
    tmp = Path(out).with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")
    tmp.replace(out)
