"""Every transactional error the client can meet, classified: abort, give up or tear down,
and whether the transaction is then definitely aborted (fail) or unknown (info)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka_chaos.workloads.txn_errors import (
    ABORTABLE,
    FATAL,
    STAGES,
    UNKNOWN_OUTCOME,
    Action,
    decide,
)

BEFORE_COMMIT = ("begin", "send", "poll", "offsets")


def _tables_disjoint() -> None:
    assert not set(FATAL) & set(ABORTABLE)
    assert not set(FATAL) & set(UNKNOWN_OUTCOME)
    assert not set(ABORTABLE) & set(UNKNOWN_OUTCOME)


def test_each_code_has_one_meaning() -> None:
    _tables_disjoint()


@pytest.mark.parametrize("code", sorted(FATAL))
def test_fatal_codes_tear_the_client_down(code: int) -> None:
    for stage in BEFORE_COMMIT:
        d = decide(code, stage)
        assert d.action is Action.TEAR_DOWN
        assert d.outcome == "fail", "no EndTxn(commit) was sent: it cannot have committed"
    at_commit = decide(code, "commit")
    assert at_commit.action is Action.TEAR_DOWN and at_commit.outcome == "info"


@pytest.mark.parametrize("code", sorted(ABORTABLE))
def test_abortable_codes_lead_to_an_abort(code: int) -> None:
    for stage in (*BEFORE_COMMIT, "commit"):
        d = decide(code, stage)
        assert d.action is Action.ABORT and d.outcome == "fail"


@pytest.mark.parametrize("code", sorted(UNKNOWN_OUTCOME))
def test_unknown_outcome_at_commit_is_info_and_never_aborted(code: int) -> None:
    d = decide(code, "commit")
    assert d.action is Action.GIVE_UP, "an abort after a commit that landed would conflict"
    assert d.outcome == "info"


@pytest.mark.parametrize("code", sorted(UNKNOWN_OUTCOME))
def test_unknown_outcome_before_commit_is_still_definite(code: int) -> None:
    for stage in BEFORE_COMMIT:
        d = decide(code, stage)
        assert d.action is Action.GIVE_UP and d.outcome == "fail"


@pytest.mark.parametrize("code", sorted({*FATAL, *ABORTABLE, *UNKNOWN_OUTCOME}))
def test_a_failed_abort_leaves_the_outcome_unknown(code: int) -> None:
    d = decide(code, "abort")
    assert d.outcome == "info"
    assert d.action is (Action.TEAR_DOWN if code in FATAL else Action.GIVE_UP)


def test_librdkafka_flags_come_before_the_code() -> None:
    # A code we do not list, flagged abortable by librdkafka: abort.
    abortable = KafkaError(KafkaError.INVALID_RECORD, "x", txn_requires_abort=True)
    assert decide(KafkaException(abortable), "commit").action is Action.ABORT
    # A code we list as unknown, flagged fatal: tear down.
    fatal = KafkaError(KafkaError._TIMED_OUT, "x", fatal=True)
    assert decide(KafkaException(fatal), "offsets").action is Action.TEAR_DOWN
    # Fatal and abortable at once: librdkafka says the abort may still work.
    both = KafkaError(KafkaError._FENCED, "x", fatal=True, txn_requires_abort=True)
    assert decide(both, "send").action is Action.ABORT


def test_an_unlisted_error_at_commit_is_unknown() -> None:
    d = decide(KafkaError.INVALID_RECORD, "commit")
    assert (d.action, d.outcome) == (Action.GIVE_UP, "info")
    assert d.why.startswith("INVALID_RECORD")


def test_unknown_stage_is_a_bug() -> None:
    with pytest.raises(ValueError):
        decide(KafkaError._TIMED_OUT, "prepare")
    assert "commit" in STAGES
