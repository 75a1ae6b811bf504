"""Property tests: the existing checks over transactional histories (docs/results.md,
"Transactions").

Histories come from ``testkit.synthetic_txn`` (a model of Kafka's
transactional log: aborted records and markers take offsets, read_committed
reads skip them, read_uncommitted reads return aborted and open records
while the final drain stays read_committed, rewinds, rebalances inside
transactions, crashes, unknown commits, consume-transform-produce). Every
one must be judged valid by the reference (or unknown only for lack of
evidence), and the Spark checkers must find exactly what the reference
finds, in every history and in mutations of it that the existing checks must
see through or catch:

* ``lost``: a committed send's value removed from every read: lost-write or unseen;
* ``no-seek``: a rewind's seek line removed: the re-read becomes nonmonotonic;
* ``seek-back``: a rewind's seek moved back to an offset its consumer must
  read, below the next read there: exactly that ``poll-skip`` (a seek names
  the next offset to read; generated rewinds also seek to before aborted
  records and markers, which the read after the seek legitimately skips);
* ``seek-ahead``: a rewind's seek moved past the next read there: exactly
  that ``nonmonotonic-poll``;
* ``report-conflict``: an unknown or aborted transaction's delivery report
  moved to an offset where a read saw another value: exactly that
  ``inconsistent-offsets`` (a report places its record whatever the outcome);
* ``aborted-read``: an aborted value read back by the final drain at its
  offset: under read_committed no existing check may object (aborted-read
  judges it), under read_uncommitted it is data, which consumers that
  jumped over it skipped and commits past it passed.

The hypothesis test runs the reference only (fast, with shrinking); the
collected histories are then judged by Spark in one job per isolation level.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from typing import Any

import pytest
from _txn_cases import (
    Case,
    aborted_sends,
    analyse_cases,
    committed_sends,
    drain_read,
    inject_report_conflict,
    inject_seek_ahead,
    inject_seek_back,
    over_generated_histories,
    read_committed,
    renumbered,
    seek_reads,
    with_records,
)
from hypothesis import example
from kafka_chaos.checkers.results import (
    NOTHING_ACKED,
    NOTHING_READ,
    evidence_gaps,
    unknown_reasons,
    verdict,
)

from testkit import reference
from testkit.synthetic_txn import Shape, TxnHistory, _generate_with_lost_reports

SEED = int(os.environ.get("TXN_PROPERTY_SEED", "20261124"))
EXAMPLES = int(os.environ.get("TXN_PROPERTY_EXAMPLES", "150"))
# The checks the reference implements: the new transactional checks have
# property tests of their own.
EXISTING = (
    "lost-write", "unseen", "duplicate", "duplicate-unacked", "inconsistent-offsets",
    "failed-write-read",
    "nonmonotonic-send", "nonmonotonic-poll", "poll-skip", "group-double-ownership",
    "group-unowned", "group-commit-past-unread",
)  # fmt: skip

print(f"txn existing-check property tests: seed={SEED} examples={EXAMPLES}")


def mutations(h: TxnHistory) -> list[Case]:
    rnd = random.Random(h.seed)
    cases = [Case("valid", h.ops, h.config, h.seed)]
    committed = committed_sends(h.ops)
    if committed:
        v = rnd.choice(committed)
        ops = [with_records(op, lambda r, v=v: r["value"] != v) for op in h.ops]
        cases.append(Case("lost", ops, h.config, h.seed, v))
    seeks = [i for i, op in enumerate(h.ops) if op["f"] == "seek"]
    if seeks:
        i = rnd.choice(seeks)
        cases.append(Case("no-seek", renumbered(h.ops[:i] + h.ops[i + 1 :]), h.config, h.seed))
    drained = {
        (r["topic"], r["partition"])
        for op in h.ops
        if op["f"] == "poll" and op["type"] == "ok" and op["value"].get("final")
        for r in op["value"]["records"]
    }
    aborted = [a for a in aborted_sends(h.ops) if a[:2] in drained]
    if aborted and h.shape.isolation == "read_committed":  # its consumers skipped them
        record = rnd.choice(aborted)
        ops = drain_read(h.ops, record)
        for committed_only in (True, False):
            config = read_committed(h.config, committed_only)
            cases.append(Case("aborted-read", ops, config, h.seed, record[3]))
    committed_only = h.config["txn"]["isolation_level"] == "read_committed"
    back = inject_seek_back(h.ops, rnd, committed_only)
    if back:
        cases.append(Case("seek-back", back[0], h.config, h.seed, want=back[1]))
    ahead = inject_seek_ahead(h.ops, rnd)
    if ahead:
        cases.append(Case("seek-ahead", ahead[0], h.config, h.seed, want=ahead[1]))
    conflict = inject_report_conflict(h.ops, rnd)
    if conflict:
        cases.append(Case("report-conflict", conflict[0], h.config, h.seed, want=conflict[1]))
    return cases


def existing_keys(found: dict[str, list[tuple]]) -> dict[str, Counter]:
    return {name: Counter(keys) for name, keys in found.items() if name in EXISTING and keys}


def existing_verdict(counts: dict[str, int], case: Case, evidence: dict[str, int]) -> str:
    """The verdict the existing checks give (the new ones are judged elsewhere)."""
    final = any(op["value"] and op["value"].get("final") for op in case.ops if op["f"] == "poll")
    checks = reference.checks_of(
        {n: c for n, c in counts.items() if n in EXISTING}, case.config, final
    )
    checks = {n: c for n, c in checks.items() if n in EXISTING}
    return verdict(checks, unknown_reasons(checks, evidence))


def _reference_verdict(case: Case) -> str:
    found = reference.check(case.ops, case.config)
    counts = {name: len(keys) for name, keys in found.items()}
    return existing_verdict(counts, case, reference.evidence(case.ops))


COLLECTED: list[Case] = []

# A generated history whose read_committed consumer, after a seek, reads past
# aborted records and markers (2 such reads), always judged: the corpus drawn from
# SEED held it in some test processes and not in others (CI: 65 reads at the seek,
# none past it; alone: 61 and 2), so the check below that the rule is exercised
# no longer depends on which.
A_JUMP_AFTER_A_SEEK = _generate_with_lost_reports(
    15000, 35,
    Shape(mode="mixed", consumer_mode="assign", processes=4, partitions=3, max_ops=4,
          abort_p=0.5, error_p=0.1, info_p=0.0, crash_p=0.0, rebalance_p=0.05, batch=1,
          isolation="read_committed"),
)  # fmt: skip


@example(h=A_JUMP_AFTER_A_SEEK)
@over_generated_histories(SEED, EXAMPLES, max_txns=40)
def test_reference_judges_every_generated_txn_history_valid(h: TxnHistory) -> None:
    found = existing_keys(reference.check(h.ops, h.config))
    assert not found, (h.seed, h.shape, found)
    evidence = reference.evidence(h.ops)
    case = Case("valid", h.ops, h.config, h.seed)
    have = _reference_verdict(case)
    gaps = evidence_gaps(evidence)  # unknown only for lack of evidence: nothing committed or read
    assert set(gaps) <= {NOTHING_ACKED, NOTHING_READ}, (h.seed, gaps)
    assert have == ("unknown" if gaps else "valid"), (h.seed, h.shape, gaps)
    for mutated in mutations(h):
        found = existing_keys(reference.check(mutated.ops, mutated.config))
        if mutated.kind == "lost":
            assert (mutated.value,) in found.get("lost-write", {}) or (mutated.value,) in found.get(
                "unseen", {}
            ), (h.seed, found)
        if mutated.kind == "aborted-read" and mutated.config["txn"]["isolation_level"] == (
            "read_committed"
        ):
            assert not found, (h.seed, found)
        if mutated.kind in ("seek-back", "seek-ahead", "report-conflict"):
            check = {
                "seek-back": "poll-skip",
                "seek-ahead": "nonmonotonic-poll",
                "report-conflict": "inconsistent-offsets",
            }[mutated.kind]
            assert found == {check: Counter([mutated.want])}, (h.seed, mutated.want, found)
        COLLECTED.append(mutated)


def _judge_with_spark(spark, tmp_path, cases: list[Case], config: dict[str, Any]) -> list:
    results = analyse_cases(spark, tmp_path, cases, config)
    mismatches = []
    for hid, case in enumerate(cases):
        checks = results[hid]["checks"]
        got = {
            name: Counter(reference.key_of(name, ex) for ex in c["examples"])
            for name, c in checks.items()
            if c["count"] and name in EXISTING
        }
        want = existing_keys(reference.check(case.ops, case.config))
        if got != want:
            mismatches.append((hid, case.kind, case.source, got, want))
        evidence = results[hid]["evidence"]
        if evidence != reference.evidence(case.ops):
            mismatches.append((hid, case.kind, evidence, reference.evidence(case.ops)))
        if results[hid]["ops"] != len(case.ops):
            mismatches.append((hid, case.kind, f"ops {results[hid]['ops']} != {len(case.ops)}"))
        counts = {n: c["count"] for n, c in checks.items()}
        if existing_verdict(counts, case, evidence) != _reference_verdict(case):
            mismatches.append((hid, case.kind, "verdict"))
    return mismatches


@pytest.mark.parametrize(
    "committed_only", [True, False], ids=["read_committed", "read_uncommitted"]
)
def test_spark_agrees_with_reference_on_txn_histories(
    spark, tmp_path, record_property, committed_only
) -> None:
    if not COLLECTED:
        pytest.skip("run together with the reference property test")
    level = "read_committed" if committed_only else "read_uncommitted"
    cases = [c for c in COLLECTED if c.config["txn"]["isolation_level"] == level]
    kinds = Counter(c.kind for c in cases)
    found = Counter(
        (c.kind, name) for c in cases for name in existing_keys(reference.check(c.ops, c.config))
    )
    # Valid reads right after a seek: at its offset, or past aborted records and markers.
    after_seek = Counter(
        "jump" if s.read > s.offset else "at"
        for c in cases
        if c.kind == "valid"
        for s in seek_reads(c.ops)
    )
    record_property(
        "logged",
        f"seed={SEED} (TXN_PROPERTY_SEED), {EXAMPLES} generated histories; {level}: "
        f"{len(cases)} judged in one Spark job, per kind {dict(kinds)}; "
        f"findings per kind and check {dict(found)}; valid reads after a seek {dict(after_seek)}",
    )
    mismatches = _judge_with_spark(spark, tmp_path, cases, cases[0].config)
    assert not mismatches, mismatches[:5]
    # The mutations must exercise the rules, or these tests could not fail.
    assert kinds["valid"] >= EXAMPLES // 5, kinds  # each isolation level, generated valid
    assert found[("report-conflict", "inconsistent-offsets")], found
    if committed_only:
        assert kinds["lost"] and kinds["no-seek"], kinds
        assert found[("no-seek", "nonmonotonic-poll")], found
        assert found[("seek-back", "poll-skip")], found
        assert found[("seek-ahead", "nonmonotonic-poll")], found
        assert after_seek["jump"] and after_seek["at"], after_seek
        assert not any(kind == "aborted-read" for kind, _ in found), found
    else:
        # an aborted record read_uncommitted consumers skipped, or a commit passed
        passed = ("poll-skip", "group-commit-past-unread")
        assert any(found[("aborted-read", name)] for name in passed), found
