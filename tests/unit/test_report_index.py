"""The store index page over several simulated runs."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from kafka_chaos.reports.index import scan_store, write_index
from kafka_chaos.reports.render import ReportError, write_report
from report_fixtures import XSS, assert_self_contained, build_run

from kafka_chaos.cli import main

RUNS = (
    ("lost-ack", "20261120T010000Z", "valid"),
    ("lost-ack", "20261121T010000Z", "invalid"),
    ("lost-ack", "20261122T010000Z", "invalid"),
    ("kill-leader", "20261121T020000Z", "valid"),
    ("kill-leader", "20261122T020000Z", "unknown"),
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    for test, stamp, kind in RUNS:
        run = store / test / stamp
        build_run(run, kind, seconds=14)
        write_report(run)
    (store / "latest").symlink_to(Path("lost-ack") / "20261122T010000Z")
    return store


def test_runs_are_listed_newest_first_with_verdicts(store: Path) -> None:
    runs = scan_store(store)
    assert [(r.test, r.stamp) for r in runs] == sorted(
        [(t, s) for t, s, _ in RUNS], key=lambda x: x[1], reverse=True
    )
    assert [r.verdict for r in runs][:2] == ["unknown", "invalid"]
    assert runs[1].anomalies == {"lost-write": 1, "nonmonotonic-poll": 2}
    assert runs[1].error_checks == {"lost-write"}


def test_index_page_links_reports_and_filters_by_verdict(store: Path) -> None:
    page = write_index(store).read_text()
    rows = re.findall(r'<tr class="run v-(\w+)">', page)
    assert rows == ["unknown", "invalid", "valid", "invalid", "valid"]
    assert 'href="lost-ack/20261122T010000Z/report.html"' in page
    for verdict in ("all", "valid", "invalid", "unknown"):
        assert f'id="f-{verdict}"' in page and f'label for="f-{verdict}"' in page
    # the CSS filter hides rows of other verdicts, so it works with JS disabled
    assert "#f-invalid:checked ~ table.runs tr.run:not(.v-invalid)" in page
    assert "2 valid · 2 invalid · 1 unknown" in page
    assert "Kafka" in page and "4.4.0" in page and "kill, partition" in page
    assert_self_contained(page)


def test_scenarios_side_by_side_show_each_tests_newest_verdict(store: Path) -> None:
    page = write_index(store).read_text()
    cells = page[page.index('id="side-by-side"') : page.index('id="runs"')]
    assert re.findall(r'<tr class="cell v-(\w+)">', cells) == ["unknown", "invalid"]
    assert "kill-leader" in cells and "lost-ack" in cells
    assert "1 valid · 0 invalid · 1 unknown" in cells  # kill-leader's two runs
    assert "1 valid · 2 invalid · 0 unknown" in cells  # lost-ack's three
    assert "assign (no group)" in cells


def test_trends_show_anomaly_counts_per_run_oldest_first(store: Path) -> None:
    page = write_index(store).read_text()
    trends = page[page.index('id="trends"') :]
    lost = trends[trends.index("lost-ack") :]
    assert re.search(r"<th>lost-write</th><th>nonmonotonic-poll</th><th>total</th>", lost)
    totals = re.findall(r'<td class="n"><strong>(\d+)</strong></td>', lost)
    assert totals == ["0", "3", "3"]  # valid, invalid, invalid: oldest first
    assert 'aria-label="anomalies per run of lost-ack"' in lost


def test_runs_without_results_or_report_are_still_listed(tmp_path: Path) -> None:
    build_run(tmp_path / "t" / "20261122T000000Z", "invalid", results=False, xss=True)
    (tmp_path / "t" / "not-a-run").mkdir()
    page = write_index(tmp_path).read_text()
    assert re.findall(r'<tr class="run v-(\w+)">', page) == ["unknown"]
    assert "(no report)" in page
    assert XSS not in page and html.escape(XSS, quote=False) in page


def test_started_at_orders_runs_with_free_form_names(tmp_path: Path) -> None:
    for name, started in (("b", "2026-01-02T00:00:00Z"), ("a", "2026-03-01T00:00:00Z")):
        run = tmp_path / "t" / name
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"started_at": started}))
    assert [r.stamp for r in scan_store(tmp_path)] == ["a", "b"]


def test_empty_and_missing_stores(tmp_path: Path) -> None:
    assert "no run directories" in write_index(tmp_path).read_text()
    with pytest.raises(ReportError, match="not a run store"):
        write_index(tmp_path / "absent")


def test_cli_index(store: Path) -> None:
    assert main(["index", str(store)]) == 0
    assert (store / "index.html").is_file()
