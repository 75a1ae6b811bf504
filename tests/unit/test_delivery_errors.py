"""Every classified error code, the single-attempt refinement and the unknown default."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from kafka_chaos.workloads.delivery_errors import (
    ALWAYS_DEFINITE,
    COMMIT_DEFINITE,
    DEFINITE_IF_SINGLE_ATTEMPT,
    INDETERMINATE_CODES,
    classify,
    classify_commit,
    error_name,
)


def test_tables_are_disjoint_and_explained():
    tables = [ALWAYS_DEFINITE, DEFINITE_IF_SINGLE_ATTEMPT, INDETERMINATE_CODES]
    for i, a in enumerate(tables):
        for b in tables[i + 1 :]:
            assert not set(a) & set(b)
        assert all(reason for reason in a.values())


@pytest.mark.parametrize("code", sorted(ALWAYS_DEFINITE), ids=error_name)
def test_always_definite(code):
    assert classify(code) == "fail"
    assert classify(code, single_attempt=True) == "fail"
    assert classify(KafkaError(code)) == "fail"


@pytest.mark.parametrize("code", sorted(DEFINITE_IF_SINGLE_ATTEMPT), ids=error_name)
def test_refusals_are_definite_only_without_retries(code):
    # With retries an earlier attempt may have been appended before this refusal.
    assert classify(code) == "info"
    assert classify(code, single_attempt=True) == "fail"


@pytest.mark.parametrize("code", sorted(INDETERMINATE_CODES), ids=error_name)
def test_indeterminate_even_with_a_single_attempt(code):
    assert classify(code) == "info"
    assert classify(code, single_attempt=True) == "info"
    assert classify(KafkaError(code), single_attempt=True) == "info"


@pytest.mark.parametrize(
    "code, expected",
    [
        (KafkaError._MSG_TIMED_OUT, "info"),
        (KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, "info"),
        (KafkaError.REQUEST_TIMED_OUT, "info"),
        (KafkaError._TRANSPORT, "info"),
        (KafkaError._QUEUE_FULL, "fail"),
        (KafkaError.MSG_SIZE_TOO_LARGE, "fail"),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, "fail"),
        (KafkaError.NOT_ENOUGH_REPLICAS, "info"),
        (KafkaError.NOT_LEADER_FOR_PARTITION, "info"),
    ],
    ids=lambda x: error_name(x) if isinstance(x, int) else x,
)
def test_named_cases_with_default_retries(code, expected):
    assert classify(code) == expected


@pytest.mark.parametrize("code", [12345, -12345, KafkaError.UNKNOWN, KafkaError.INVALID_CONFIG])
def test_unknown_or_unlisted_codes_are_indeterminate(code):
    assert classify(code) == "info"
    assert classify(code, single_attempt=True) == "info"
    assert classify_commit(code) == "info"


@pytest.mark.parametrize("code", sorted(COMMIT_DEFINITE), ids=error_name)
def test_commit_refusals_are_definite(code):
    assert classify_commit(code) == "fail"


@pytest.mark.parametrize(
    "code", [KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
             KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE],
    ids=error_name,
)  # fmt: skip
def test_commit_outcome_unknown(code):
    assert classify_commit(code) == "info"


def test_error_names_are_stable():
    assert error_name(KafkaError._MSG_TIMED_OUT) == "_MSG_TIMED_OUT"
    assert error_name(KafkaError(KafkaError.NOT_ENOUGH_REPLICAS)) == "NOT_ENOUGH_REPLICAS"
    assert error_name(987654).startswith("ERR_987654")
