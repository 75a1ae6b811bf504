"""Every check that can count against the verdict names the promise it enforces.

A finding is a claim against a source (checkers/check.py, ``Basis``), so a
check of error severity under some setting without a basis, or with an
empty or non-https one, fails here; so does a basis whose allowed shapes
claim a severity the check never takes.  The severities are evaluated over
specs built here, independently of ``checkers.catalog.SETTINGS``.
"""

from __future__ import annotations

import copy
import html
from pathlib import Path
from typing import Any

import pytest
from kafka_chaos.checkers import catalog
from kafka_chaos.checkers.check import Check
from kafka_chaos.checkers.results import build_checks
from kafka_chaos.checkers.spec_view import CheckedSpec
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.reports.explanations import promise
from kafka_chaos.reports.render import write_report
from report_fixtures import assert_self_contained, build_run


def _spec(**sections: dict[str, Any]) -> CheckedSpec:
    """The default run with some sections' fields replaced."""
    config = TestSpec().to_dict()
    for section, fields in sections.items():
        if isinstance(fields, dict):
            config[section] = {**config[section], **fields}
        else:
            config[section] = fields
    return CheckedSpec.of(copy.deepcopy(config))


SPECS: dict[str, CheckedSpec] = {
    "default": _spec(),
    "no faults": _spec(nemesis={"faults": []}),
    "acks=0": _spec(producer={"acks": "0", "enable_idempotence": False}),
    "acks=1": _spec(producer={"acks": "1", "enable_idempotence": False}),
    "idempotence off": _spec(producer={"enable_idempotence": False}),
    "java producer": _spec(producer={"client": "java"}),
    "unclean election": _spec(topic={"unclean_leader_election": True}),
    "txn ctp": _spec(workload="txn", txn={"mode": "ctp"}),
    "read_uncommitted": _spec(workload="txn", txn={"isolation_level": "read_uncommitted"}),
    "no ww edges": _spec(workload="txn", checker={"ww_deps": False}),
    "no ww, read_uncommitted": _spec(
        workload="txn",
        checker={"ww_deps": False},
        txn={"isolation_level": "read_uncommitted"},
    ),
    "exactly-once mirror": _spec(workload="mirror", mirror={"exactly_once": True}),
}


def _severities(check: Check) -> set[str]:
    return {check.severity(spec) for spec in SPECS.values()}


CHECKS = catalog.every_check()


@pytest.mark.parametrize("check", CHECKS, ids=[c.name for c in CHECKS])
def test_a_check_that_can_be_an_error_names_its_promise(check: Check) -> None:
    if "error" in _severities(check):
        assert check.basis is not None, f"{check.name} can be an error but names no source"
    assert catalog.can_be_error(check) == ("error" in _severities(check)), (
        "catalog.SETTINGS misses a setting that changes this check's severity"
    )


@pytest.mark.parametrize("check", CHECKS, ids=[c.name for c in CHECKS])
def test_a_basis_is_whole_and_links_over_https(check: Check) -> None:
    b = check.basis
    if b is None:
        return
    assert b.promise.strip() and b.source.strip() and b.url.strip(), check.name
    assert b.url.startswith("https://"), (check.name, b.url)
    assert " " not in b.url, (check.name, b.url)
    assert all(isinstance(a, str) and a.strip() for a in b.allows), check.name


@pytest.mark.parametrize("check", CHECKS, ids=[c.name for c in CHECKS])
def test_an_allowed_shape_keeps_the_severity_it_claims(check: Check) -> None:
    """An allowed shape that names its severity ("(info)", "(warning)") must be one
    the check takes under some setting: the source allows it, so the code does."""
    if check.basis is None:
        return
    for shape in check.basis.allows:
        for severity in ("info", "warning"):
            if f"({severity})" in shape:
                assert severity in _severities(check), (check.name, shape)


def test_results_json_carries_the_basis() -> None:
    config = TestSpec().to_dict()
    spec = CheckedSpec.of(config)
    results = build_checks(catalog.checks_for(spec), spec, {}, True)
    lost = results["lost-write"]["basis"]
    record = catalog.find("lost-write")
    assert record is not None and record.basis is not None
    assert lost == {
        "promise": record.basis.promise,
        "source": record.basis.source,
        "url": record.basis.url,
        "allows": list(record.basis.allows),
    }
    assert all("basis" in r for r in results.values())


def test_the_docs_list_quotes_each_promise() -> None:
    for family in catalog.families():
        text = catalog.basis_list(family.name)
        for c in catalog.checks_of(family):
            if c.basis is not None:
                assert f"\u201c{c.basis.promise}\u201d" in text and c.basis.url in text


def test_the_report_links_only_https_sources() -> None:
    result = {
        "basis": {
            "promise": "p",
            "source": "s",
            "url": "javascript:alert(1)",
            "allows": ["a", 3],
        }
    }
    shown = promise("lost-write", result)
    assert shown is not None
    assert (shown.label, shown.promise, shown.url, shown.allows) == ("Promise", "p", None, ("a",))
    # An older results.json without the field: the catalog's record.
    record = catalog.find("G0")
    assert record is not None and record.basis is not None
    old = promise("G0", {})
    assert old is not None and old.url == record.basis.url
    assert old.label.startswith("Never an error")
    assert promise("no-such-check", {}) is None


def test_the_report_shows_the_promise_of_an_anomaly(tmp_path: Path) -> None:
    """A results.json without the field (the fixture's) shows the catalog's basis,
    its URL as text: the page stays self-contained."""
    build_run(tmp_path, "invalid")
    page = write_report(tmp_path).read_text()
    lost = page[page.index('id="anomaly-lost-write"') :]
    lost = lost[: lost.index("</article>")]
    record = catalog.find("lost-write")
    assert record is not None and record.basis is not None
    assert html.escape(record.basis.promise) in lost
    assert html.escape(record.basis.url) in lost
    assert_self_contained(page)
