"""Severities, validity and the verdict: turning anomaly counts into results.json.

Severity comes from the run config because the same observation can be a
broken promise or legal behaviour: a duplicate is an error only when the
producer promised idempotence.  Only severity "error" counts against the
verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHECKS = (
    "lost-write",
    "unseen",
    "acked-lost",
    "duplicate",
    "inconsistent-offsets",
    "failed-write-read",
    "nonmonotonic-send",
    "nonmonotonic-poll",
    "poll-skip",
    "group-double-ownership",
    "group-unowned",
    "group-commit-past-unread",
)
# The transactional workload's checks (checkers/txn_checks.py), after CHECKS;
# exactly-once only in consume-transform-produce mode.
TXN_CHECKS = (
    "aborted-read",
    "torn-transaction",
    "precommitted-read",
    "int-nonmonotonic-poll",
    "int-poll-skip",
    "int-nonmonotonic-send",
    "int-send-skip",
)
CTP_CHECKS = ("exactly-once",)
# Share groups, KIP-932 (checkers/share_checks.py, reference: checkers/reference_share.py).
SHARE_CHECKS = (
    "share-lost",
    "share-double-acquire",
    "share-redelivered-after-accept",
    "share-redelivered-after-reject",
    "share-delivery-count",
    "share-delivery-count-stalled",
    "share-missing-redelivery",
)
NEEDS_SHARE_DRAIN = ("share-lost", "share-missing-redelivery")
# Elle's dependency cycles between transactions (checkers/cycle_checks.py).
CYCLE_CHECKS = ("G0", "G1c", "G0-process", "G1c-process", "G0-realtime", "G1c-realtime")
# With ww edges inferred the cycle checks above are information only, so the
# cycles that need no ww edge (what --no-ww-deps reports as these three Elle
# types) get a check of their own, an error (docs/results.md, "Cycle checks").
WR_CYCLE_CHECK = "G1c-wr"
WR_CYCLE_TYPES = ("G1c", "G1c-process", "G1c-realtime")


def ww_deps(config: dict[str, Any]) -> bool:
    """Whether ww edges are inferred (off: Jepsen's --no-ww-deps)."""
    return bool(config.get("checker", {}).get("ww_deps", True))


def cycle_checks_for(config: dict[str, Any]) -> tuple[str, ...]:
    """A transactional run's cycle checks: G1c-wr only with ww edges, since
    without them G1c and its variants already are exactly those cycles."""
    return CYCLE_CHECKS + ((WR_CYCLE_CHECK,) if ww_deps(config) else ())


def checks_for(config: dict[str, Any]) -> tuple[str, ...]:
    """The checks a run's workload is judged by: a queue history keeps exactly
    the queue checks (results.json unchanged), a transactional one adds its own,
    and a share-group run the share checks."""
    if not is_txn(config):
        return CHECKS + SHARE_CHECKS if is_share(config) else CHECKS
    ctp = config.get("txn", {}).get("mode") == "ctp"
    return CHECKS + TXN_CHECKS + (CTP_CHECKS if ctp else ()) + cycle_checks_for(config)


def is_share(config: dict[str, Any]) -> bool:
    return (config.get("consumer") or {}).get("mode") == "share"


def is_txn(config: dict[str, Any]) -> bool:
    return config.get("workload", "queue") == "txn"


def is_ctp(config: dict[str, Any]) -> bool:
    return "exactly-once" in checks_for(config)


EXPLANATIONS = {
    "share-lost": "The broker acknowledged these sends, yet no member of the share group ever "
    "had an accept or reject of them committed, though their delivery count stayed below the "
    "limit and the group's share drain went quiet: the queue dropped them. Values whose "
    "accept or reject has an unknown outcome are counted apart (undecided).",
    "share-double-acquire": "Two members held the same record at once: two deliveries with "
    "the same delivery count (one acquisition handed out twice), or a member's "
    "acknowledgement applied after another member had already received the record.",
    "share-redelivered-after-accept": "A record was delivered again after a member's accept "
    "of it had been committed: the broker forgot an acknowledgement.",
    "share-redelivered-after-reject": "A record was delivered again after a member's reject "
    "(archive) of it had been committed.",
    "share-delivery-count": "A record's delivery count went backwards between two deliveries, "
    "or exceeded the group's delivery limit.",
    "share-delivery-count-stalled": "The same member got a record again with the same "
    "delivery count: that acquisition was not counted, so the record can be delivered more "
    "often than the delivery limit allows. Seen after a share-partition leader failover, "
    "whose in-flight acquisitions Kafka does not persist; a warning, not lost data.",
    "share-missing-redelivery": "A record released by a member, or held by one that crashed or "
    "never acknowledged it, was never delivered again although its delivery limit was not "
    "reached and the share drain went quiet.",
    "lost-write": "The broker acknowledged these sends, yet no consumer ever read them, although "
    "later offsets of the same partition were read: the acknowledged data vanished from the log.",
    "unseen": "The broker acknowledged these sends but nobody read them, and nothing beyond them "
    "was read in their partition. After a final drain this means the data is gone; without one "
    "the consumers may simply not have reached it yet.",
    "acked-lost": "The broker acknowledged these sends, yet they are absent from the final log: a "
    "final drain read every partition from its log start to its high watermark and did not find "
    "them. Unlike lost-write and unseen, it counts values some consumer read before they "
    "vanished (an unclean leader election truncates exactly those). Values below the log start "
    "(retention) are excused.",
    "duplicate": "One sent value sits at more than one offset, i.e. it was written twice. "
    "Legal for a non-idempotent producer that retries; a broken promise when idempotence is on. "
    "The replica verification says whether the broker's log shows its producer sending it again "
    "under a bumped epoch (a client-side retry the broker could not recognise).",
    "inconsistent-offsets": "Two different values were seen at the same partition offset (by acks "
    "or reads): the log was rewritten, typically truncated after an unclean leader election.",
    "failed-write-read": "A send the client was told definitely failed was nevertheless read: the "
    "failure report was wrong (an aborted read, G1a).",
    "nonmonotonic-send": "A producer got an acknowledgement at a lower or equal offset than an "
    "earlier acknowledgement of its own in the same partition: its writes were reordered.",
    "nonmonotonic-poll": "A consumer read a partition backwards (or re-read an offset) without any "
    "assignment change that could explain a seek.",
    "poll-skip": "A consumer jumped over offsets known to hold values, without any assignment "
    "change in between: those records were skipped.",
    "group-double-ownership": "Two live members of one consumer group owned the same partition at "
    "the same time for longer than the grace period.",
    "group-unowned": "No member of the group owned this partition for longer than the threshold "
    "while the group had live members: nobody was consuming it.",
    "group-commit-past-unread": "The group committed an offset past records no member ever polled: "
    "those records are skipped for good (at-least-once broken).",
    "aborted-read": "A value that only an aborted transaction wrote was read by a consumer that "
    "promised committed data only (read_committed, or the final drain): Kafka exposed aborted "
    "data (G1a). Under read_uncommitted the workload's own consumers may read it legally.",
    "torn-transaction": "A transaction committed (an unknown outcome counts once a committed "
    "reader read one of its writes) and was partly read: some of its writes were read, yet "
    "another was never read although its partition was read past that offset, so it was not "
    "all or nothing. Each such unread write is also a lost-write; a committed transaction none "
    "of whose writes was read is lost-write only, since nothing shows it half visible.",
    "precommitted-read": "A transaction read its own writes before it committed. A read_committed "
    "consumer stops at the last stable offset, so this is an error under read_committed and "
    "legal under read_uncommitted.",
    "int-nonmonotonic-poll": "Inside one transaction, a consumer read a partition backwards (or "
    "re-read an offset) with no rebalance of that partition during the transaction.",
    "int-poll-skip": "Inside one transaction, a consumer jumped over offsets known to hold values "
    "it had to return, with no rebalance of that partition during the transaction.",
    "int-nonmonotonic-send": "Two writes of one committed transaction to one partition landed out "
    "of order: the later one at a lower or equal offset.",
    "int-send-skip": "Two consecutive writes of one committed transaction to one partition are "
    "not adjacent: another producer's write (or another transaction's) landed between them. "
    "Kafka interleaves concurrent producers in a partition, so this is legal and reported for "
    "information only, as Jepsen does.",
    "exactly-once": "Consume-transform-produce: an input below the offsets the pipeline "
    "committed never reached the output topic (lost), or reached it more than once "
    "(duplicated). Without a final drain a missing output may simply be unread yet.",
    "G0": "A cycle of write-write dependencies: transactions whose writes to several partitions "
    "interleave in opposite orders. Kafka's transactions do not order writes across "
    "partitions, so this is allowed (as in Jepsen's Kafka test).",
    "G1c": "A cycle of write-write and write-read dependencies (at least one read): T1 wrote "
    "before T2 in some partition, and T1 read what T2 wrote. Allowed while ww edges are "
    "inferred from offset order (which Kafka does not promise to be a serial order); an "
    "error when only wr edges are used (--no-ww-deps).",
    "G0-process": "A G0 cycle that also needs one process's own order of transactions.",
    "G1c-process": "A G1c cycle that also needs one process's own order of transactions: a "
    "process read, in a later transaction, data that depends on its own future writes.",
    "G0-realtime": "A G0 cycle that also needs real-time order: a transaction that began after "
    "another committed is ordered before it.",
    "G1c-realtime": "A G1c cycle that also needs real-time order: a transaction depends on one "
    "that began only after it committed.",
    "G1c-wr": "A dependency cycle that needs no write-write edge: only reads (T2 polled a "
    "value T1 sent), possibly with one process's order or real time, e.g. two transactions "
    "each reading the other's writes before either committed. Reported while ww edges are "
    "inferred (G1c and its variants are allowed then); it is what --no-ww-deps calls G1c, "
    "G1c-process or G1c-realtime, and an error whatever ww_deps says.",
    "availability": "The acknowledged-send rate fell below the configured minimum while a fault "
    "was active.",
}


def severities(config: dict[str, Any]) -> dict[str, str]:
    """Which anomalies break a promise the configured producer/consumer actually made."""
    producer = config.get("producer", {})
    acks = str(producer.get("acks", "all"))
    idempotent = bool(producer.get("enable_idempotence", True)) and acks in ("all", "-1")
    every = CHECKS + TXN_CHECKS + CTP_CHECKS + CYCLE_CHECKS + (WR_CYCLE_CHECK,) + SHARE_CHECKS
    sev = {name: "error" for name in every}
    sev["availability"] = "error"
    sev["share-delivery-count-stalled"] = "warning"
    # Concurrent producers interleave in a partition: never a broken promise.
    sev["int-send-skip"] = "info"
    uncommitted = config.get("txn", {}).get("isolation_level", "read_committed") != (
        "read_committed"
    )
    if uncommitted:
        sev["precommitted-read"] = "info"  # a read_uncommitted consumer sees open transactions
    # Jepsen's reasoning: Kafka orders writes per partition only, so ww cycles
    # (G0) are legal; with ww edges inferred from offsets, so are G1c cycles.
    # A cycle of reads without ww edges (G1c-wr) stays an error, except where
    # consumers read open transactions: read_uncommitted transactions may read
    # each other's writes (Jepsen's allowed-error-types says the same).
    for name in CYCLE_CHECKS:
        sev[name] = "info" if name.startswith("G0") or ww_deps(config) or uncommitted else "error"
    sev[WR_CYCLE_CHECK] = "info" if uncommitted else "error"
    if not idempotent:
        sev["duplicate"] = "info"  # retries legally write twice
        sev["nonmonotonic-send"] = "warning"  # retries with several in flight may reorder
    if acks == "0":
        sev["lost-write"] = sev["unseen"] = "warning"  # nothing was promised
    if (config.get("nemesis") or {}).get("faults"):
        # A fault that cuts off the group coordinator leaves partitions unowned
        # until it heals: lost liveness, which Kafka never promised to bound,
        # not lost data.  Without faults an ownership gap is a real defect.
        sev["group-unowned"] = "warning"
    return sev


def check_result(name: str, count: int, severity: str, examples: list, valid: Any = None) -> dict:
    return {
        "valid": (count == 0) if valid is None else valid,
        "count": count,
        "severity": severity,
        "explanation": EXPLANATIONS[name],
        "examples": examples,
    }


NEEDS_DRAIN = ("unseen", "exactly-once")  # a shortfall proves loss only after a final drain


@dataclass
class LossTally:
    """Acknowledged values missing from the final drain that ``acked-lost`` did not
    count as lost (checkers/loss_checks.py, the reference's twin)."""

    excused: int = 0  # below the log start: removed by retention
    undecided: int = 0  # the drain did not prove it read their partition to the end
    unproven: tuple[str, ...] = ()  # those partitions, as "topic-partition"

    @classmethod
    def of(cls, check: dict[str, Any]) -> LossTally:
        """The tally an ``acked-lost`` result was built from (``acked_lost_result``)."""
        return cls(
            check.get("excused_retention", 0),
            check.get("undecided", 0),
            tuple(check.get("unproven_partitions", ())),
        )


def acked_lost_result(check: dict[str, Any], tally: LossTally, final_drain: bool) -> None:
    """``acked-lost``'s validity and reason, in place: invalid on any loss, unknown
    while acknowledged values are missing where the drain proves nothing."""
    check["excused_retention"] = tally.excused
    check["undecided"] = tally.undecided
    check["unproven_partitions"] = list(tally.unproven)
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
        where = ", ".join(tally.unproven) or "the partition(s) of sends without a known offset"
        check["reason"] = (
            f"{tally.undecided} acknowledged value(s) are absent from a final drain that did "
            f"not prove it read {where} up to the high watermark"
        )


def summary(checks: dict[str, dict[str, Any]], evidence: dict[str, int]) -> dict[str, Any]:
    """The answer a user asks for first (results.json ``summary``): acknowledged
    messages, how many are lost (null when unknown), duplicated, read out of order."""
    lost = checks.get("acked-lost", {})

    def count(*names: str) -> int:
        return sum(checks[n]["count"] for n in names if n in checks)

    return {
        "acked": evidence.get("acked_sends", 0),
        "acked_lost": None if lost.get("valid") == "unknown" else lost.get("count"),
        "duplicated": count("duplicate"),
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


def build_checks(
    counts: dict[str, int],
    examples: dict[str, list],
    config: dict[str, Any],
    final_drain: bool,
    losses: LossTally | None = None,
) -> dict[str, dict[str, Any]]:
    """Every check of the config's workload; ``losses``: what ``acked-lost`` did not
    count (none: every acknowledged value was found by the drain)."""
    sev = severities(config)
    checks = {}
    # A drain that stopped short of a partition's high watermark proves no
    # shortfall gone (acked-lost still counts the partitions it did prove).
    proven = final_drain and not (losses and losses.undecided)
    for name in checks_for(config):
        n = counts.get(name, 0)
        valid = unseen_validity(n, proven) if name in NEEDS_DRAIN else None
        checks[name] = check_result(name, n, sev[name], examples.get(name, []), valid)
    acked_lost_result(checks["acked-lost"], losses or LossTally(), final_drain)
    for name in SHARE_CHECKS:
        if name in checks:  # judged from the history file by check_history (share_results)
            checks[name].update(valid="unknown", reason="the share checks did not run")
    return checks


def share_results(
    checks: dict[str, dict[str, Any]],
    found: dict[str, tuple[int, list]],
    tallies: dict[str, int],
    incomplete: list[str],
    config: dict[str, Any],
) -> None:
    """Fill the share checks in place: counts, examples, and ``unknown`` where a
    group's share drain did not complete and nothing was found."""
    sev = severities(config)
    for name in SHARE_CHECKS:
        count, examples = found.get(name, (0, []))
        valid: Any = None
        reason = None
        if name in NEEDS_SHARE_DRAIN and incomplete and not count:
            valid = "unknown"
            reason = f"the share drain of {', '.join(incomplete)} did not complete"
        checks[name] = check_result(name, count, sev[name], examples, valid)
        checks[name]["reason"] = reason
    checks["share-lost"]["undecided"] = tallies.get("undecided", 0)
    checks["share-lost"]["at_delivery_limit"] = tallies.get("at-limit", 0)


def write_results(results: dict[str, Any], out: Path) -> None:
    tmp = Path(out).with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")
    tmp.replace(out)
