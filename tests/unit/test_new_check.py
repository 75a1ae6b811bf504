"""Adding a check is one file: ``_check_example.SLOW_ACK`` goes all the way.

Added to the catalog, and known to no product file, it is judged in
results.json (count, severity, explanation, examples), explained in the
HTML report under its own title, and listed in docs/results.md's table of
its family.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from _check_example import LIMIT_S, NAME, SLOW_ACK
from kafka_chaos.checkers import catalog
from kafka_chaos.checkers.api import check_history
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.reports.render import render_report

from testkit.builder import HistoryBuilder

DOCS = Path(__file__).resolve().parents[2] / "docs" / "results.md"


@pytest.fixture(scope="module", autouse=True)
def added() -> Iterator[None]:
    catalog.add(SLOW_ACK)
    try:
        yield
    finally:
        catalog.remove(NAME)


def _history(path: Path) -> Path:
    b = HistoryBuilder()
    b.subscribe(10, "g", ["t"])
    b.rebalance(10, "g", assigned=[("t", 0)])
    b.send(1, 0, 0, 0)
    b.invoke_send(1, 1)
    b.advance(LIMIT_S + 1)  # the broker takes its time
    b.complete_send(1, 1, partition=0, offset=1)
    b.send(1, 2, 0, 2)
    b.poll(10, [("t", 0, v, v) for v in range(3)])
    b.crash(10)
    b.assign(99, None, [("t", 0)])
    b.poll(99, [("t", 0, v, v) for v in range(3)], final=True)
    return b.write(path)


def test_an_added_check_is_judged_reported_and_documented(spark, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    history = _history(run / "history.jsonl")
    TestSpec().save(run / "config.json")
    config = json.loads((run / "config.json").read_text())

    results = check_history(history, config, run / "results.json")
    slow = json.loads((run / "results.json").read_text())["checks"][NAME]
    assert slow == results["checks"][NAME]
    assert (slow["count"], slow["severity"], slow["valid"]) == (1, "warning", False)
    assert slow["explanation"] == SLOW_ACK.explanation
    assert [ex["value"] for ex in slow["examples"]] == [1]
    assert results["verdict"] == "valid"  # a warning breaks no promise

    page = render_report(run)
    assert SLOW_ACK.title in page and SLOW_ACK.meaning in page

    row = f"| `{NAME}` | {SLOW_ACK.finds} | warning |"
    assert row in catalog.table("queue")
    assert row in catalog.render_docs(DOCS.read_text())


def test_an_added_check_joins_only_the_runs_of_its_family() -> None:
    assert NAME in [c.name for c in catalog.checks_for({"workload": "txn"})]
    share_only = {"workload": "queue", "consumer": {"mode": "share"}}
    assert NAME in [c.name for c in catalog.checks_for(share_only)]
    with pytest.raises(ValueError, match="exists already"):
        catalog.add(SLOW_ACK)


def test_docs_tables_are_written_from_the_catalog() -> None:
    """docs/results.md holds exactly the catalog's tables (the added check aside)."""
    catalog.remove(NAME)
    try:
        assert catalog.render_docs(DOCS.read_text()) == DOCS.read_text(), (
            "run: python3 -m kafka_chaos.checkers.catalog docs/results.md"
        )
    finally:
        catalog.add(SLOW_ACK)
