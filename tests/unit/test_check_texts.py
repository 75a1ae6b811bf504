"""The report's per-check texts come from the check's record, and only from there.

A check declares its range mechanism and its hints on its ``Check`` record
(checkers/check.py, checkers/hints.py); reports/grouping.py and
reports/explanations.py keep no table of their own keyed by check name.  So
a check added from a test, known to no product file, gets both in the report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from _check_example import SLOW_ACK
from kafka_chaos.checkers import catalog, hints
from kafka_chaos.reports.explanations import hints as report_hints
from kafka_chaos.reports.grouping import mechanism

NAME = "slow-ack-texts"


def _too_slow(config: dict[str, Any]) -> list[str]:
    return (
        ["The run's linger.ms delays every ack."]
        if (config.get("producer") or {}).get("linger_ms", 0) > 1000
        else []
    )


@pytest.fixture
def added() -> Iterator[None]:
    check = dataclasses.replace(
        SLOW_ACK,
        name=NAME,
        mechanism=lambda ex: "acknowledged late" + (" twice" if len(ex) == 2 else ""),
        hints=(_too_slow, hints.idempotence_off),
    )
    catalog.add(check)
    try:
        yield
    finally:
        catalog.remove(NAME)


def test_an_added_check_brings_its_mechanism_and_hints(added: None) -> None:
    assert mechanism(NAME, [{}]) == "acknowledged late"
    assert mechanism(NAME, [{}, {}]) == "acknowledged late twice"
    slow = {"producer": {"linger_ms": 5000, "enable_idempotence": False}}
    assert report_hints(NAME, slow) == [
        "The run's linger.ms delays every ack.",
        hints.IDEMPOTENCE_OFF,
    ]
    assert report_hints(NAME, {"producer": {"linger_ms": 5}}) == []


def test_a_check_without_texts_shows_its_name_and_no_hints() -> None:
    assert mechanism("share-lost", []) == "share-lost"
    assert report_hints("share-lost", {"producer": {"acks": "1"}}) == []
    assert mechanism("no-such-check", []) == "no-such-check"
    assert report_hints("no-such-check", {"producer": {"acks": "1"}}) == []


def test_acked_lost_names_an_overwrite_when_the_offsets_hold_other_values() -> None:
    assert mechanism("acked-lost", [{"now_values": []}]) == (
        "acknowledged, then absent from the final log"
    )
    assert mechanism("acked-lost", [{}, {"now_values": [7]}]) == (
        "acknowledged with one value, now holding another"
    )


def test_loss_hints_follow_acks_unclean_election_and_min_isr() -> None:
    loose = {
        "producer": {"acks": "1"},
        "topic": {"unclean_leader_election": True, "min_insync_replicas": 1},
    }
    for name in ("lost-write", "inconsistent-offsets", "unseen", "acked-lost"):
        said = report_hints(name, loose)
        assert [s.split(":")[0] for s in said[:2]] == [
            "Allowed by acks=1",
            "Allowed by unclean.leader.election.enable=true",
        ]
        assert said[2].startswith("min.insync.replicas=1")
    assert report_hints("duplicate", loose) == []
