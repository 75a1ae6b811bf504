"""The safety report rendered from simulated run directories."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from kafka_chaos.reports.render import ReportError, write_report
from report_fixtures import XSS, assert_self_contained, build_run

from kafka_chaos.cli import main


def render(run: Path) -> str:
    return write_report(run).read_text()


def test_invalid_run_shows_the_lost_write_with_its_ack_and_neighbours(tmp_path: Path) -> None:
    sim = build_run(tmp_path, "invalid", expected="invalid")
    page = render(tmp_path)
    value, ack_index, invoke_index, _ = sim.acked[sim.lost]
    part, offset = sim.lost

    assert 'class="banner v-invalid"' in page
    assert "error severity was found (lost-write)." in page
    assert "expected invalid — expectation held" in page
    # worst first: the error-severity anomaly precedes the warning
    assert page.index('id="anomaly-lost-write"') < page.index('id="anomaly-nonmonotonic-poll"')
    lost = page[page.index('id="anomaly-lost-write"') :]
    lost = lost[: lost.index("</article>")]
    assert f'Value <strong class="val">{value}</strong>' in lost
    assert f"chaos/{part} offset {offset}" in lost
    assert f"history index <strong>{ack_index}</strong>" in lost
    assert f"invoked at index {invoke_index}" in lost
    assert "<strong>nothing</strong>" in lost  # nothing was read at the lost offset
    rows = re.findall(r'<tr class="lost">\s*<td class="n">(\d+)', lost)
    assert rows == [str(offset)]
    for o in range(offset - 3, offset + 4):  # the neighbours with what was read there
        if o != offset and (part, o) in sim.acked:
            assert f"[{sim.acked[(part, o)][0]}]" in lost
    assert "Unclean leader election was enabled" in lost  # config-specific hint
    assert 'id="anomaly-nonmonotonic-poll"' in page and "sev-warning" in page
    assert page.count('class="chart"') == 4  # throughput, latency, partitions, lag histogram
    assert "kill n2" in page  # fault band label
    assert 'href="logs/n1/server.log"' in page and 'href="history.jsonl"' in page
    assert_self_contained(page)


def test_valid_run_has_no_anomalies_and_flags_a_broken_expectation(tmp_path: Path) -> None:
    build_run(tmp_path, "valid", expected="invalid")
    page = render(tmp_path)
    assert 'class="banner v-valid"' in page
    assert "No anomalies: every check found a count of 0." in page
    assert "expected invalid — expectation NOT held" in page
    assert 'class="anomaly' not in page


def test_unknown_run_reports_the_incomplete_drain(tmp_path: Path) -> None:
    build_run(tmp_path, "unknown")
    page = render(tmp_path)
    assert 'class="banner v-unknown"' in page
    assert "The checkers could not decide (unseen)" in page
    assert "the final drain did not complete" in page
    assert 'id="anomaly-unseen"' in page


def test_missing_optional_inputs_render_not_available_sections(tmp_path: Path) -> None:
    build_run(tmp_path, "invalid", results=False, optional=False)
    page = render(tmp_path)
    assert 'class="banner v-unknown"' in page
    assert "results.json not available (file absent)" in page
    assert "cluster-state.jsonl not available" in page
    assert "schedule.json not available" in page
    assert "no node logs were collected" in page
    assert "realtime lag not available" in page
    # the timeline still comes from the history
    assert "from history.jsonl" in page and page.count('class="chart"') == 2


def test_an_empty_directory_still_renders(tmp_path: Path) -> None:
    page = render(tmp_path)
    assert 'class="banner v-unknown"' in page
    assert "config.json not available" in page
    assert "no timeline" in page


def test_results_timeline_is_preferred_over_the_history(tmp_path: Path) -> None:
    build_run(tmp_path, "invalid", results_timeline=True)
    (tmp_path / "history.jsonl").unlink()  # proves the history is not needed
    page = render(tmp_path)
    assert "Per second, from results.json" in page
    assert page.count('class="chart"') == 4
    assert "95.0" in page and "40.0" in page  # the per-fault rates from results


def test_a_corrupt_history_line_is_reported_and_the_prefix_kept(tmp_path: Path) -> None:
    build_run(tmp_path, "valid", results=False)
    lines = (tmp_path / "history.jsonl").read_text().splitlines(keepends=True)
    lines.insert(500, "{not json\n")
    (tmp_path / "history.jsonl").write_text("".join(lines))
    page = render(tmp_path)
    assert "History read stopped early" in page and "line 501" in page
    assert "(500 history lines read)" in page


def test_garbage_results_json_is_not_available(tmp_path: Path) -> None:
    build_run(tmp_path, "valid")
    (tmp_path / "results.json").write_text("{\n  truncated")
    page = render(tmp_path)
    assert "results.json not available: line 2: invalid JSON" in page
    assert 'class="banner v-unknown"' in page


def test_kafka_and_history_data_is_escaped(tmp_path: Path) -> None:
    build_run(tmp_path, "invalid", xss=True)
    page = render(tmp_path)
    assert "<script" not in page.lower()
    assert XSS not in page
    escaped = html.escape(XSS, quote=False)
    assert page.count(escaped) >= 6  # scenario, fault name, targets, example key+value, check
    # also in SVG text (fault band label) and in a link to a node log file
    assert re.search(r'<text[^>]*class="fault-label"[^>]*>kill&lt;script&gt;', page)
    assert "evil%3Cscript%3Ealert%281%29%3C_script%3E.log" in page
    assert_self_contained(page)


def test_expected_verdict_respected_in_results_json(tmp_path: Path) -> None:
    build_run(tmp_path, "valid")
    results = json.loads((tmp_path / "results.json").read_text())
    results["verdict"] = "bogus"
    (tmp_path / "results.json").write_text(json.dumps(results))
    assert "no recognised verdict" in render(tmp_path)


def test_missing_run_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="nope: not a run directory"):
        write_report(tmp_path / "nope")


def test_cli_report_rewrites_the_page(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    build_run(tmp_path, "valid")
    assert main(["report", str(tmp_path)]) == 0
    assert (tmp_path / "report.html").is_file()
    assert str(tmp_path / "report.html") in capsys.readouterr().out
    assert main(["report", str(tmp_path / "missing")]) == 3


def test_stylesheet_is_inlined_unescaped(tmp_path: Path) -> None:
    page = render(tmp_path)
    style = page[page.index("<style>") : page.index("</style>")]
    assert '"DejaVu Sans"' in style and "&#34;" not in style and "&gt;" not in style


def test_private_keys_under_logs_are_not_linked(tmp_path: Path) -> None:
    build_run(tmp_path, "valid")
    config = tmp_path / "logs" / "n1" / "config"
    config.mkdir()
    for name in ("ssh_host_ed25519_key", "id_rsa", "ssh_host_ed25519_key.pub", "server.properties"):
        (config / name).write_text("x")
    page = render(tmp_path)
    assert "ssh_host_ed25519_key.pub" in page and "config/server.properties" in page
    assert 'ssh_host_ed25519_key"' not in page and "id_rsa" not in page
    assert "2 private key file(s) under logs/ are not linked" in page


def test_lag_histogram_labels_include_the_overflow_bucket(tmp_path: Path) -> None:
    build_run(tmp_path, "valid")
    results = json.loads((tmp_path / "results.json").read_text())
    lag = results["stats"]["realtime_lag"]
    lag["histogram"] += [{"le_ms": 1000, "count": 3}, {"le_ms": None, "count": 1}]
    (tmp_path / "results.json").write_text(json.dumps(results))
    page = render(tmp_path)
    assert "≤1s: 3" in page and "&gt;1s: 1" in page


def test_undecodable_bytes_do_not_break_the_report(tmp_path: Path) -> None:
    build_run(tmp_path, "valid", results=False)
    with open(tmp_path / "history.jsonl", "ab") as fh:
        fh.write(b'{"index": 99999, "f": "\xff\xfe"}\n')
    with open(tmp_path / "cluster-state.jsonl", "ab") as fh:
        fh.write(b"\xff\xfe\n")
    page = render(tmp_path)
    assert "not UTF-8 after" in page
    assert "line 32: skipped" in page


def test_a_transactional_run_shows_its_cycle_section(tmp_path: Path) -> None:
    build_run(tmp_path, "valid")
    results = json.loads((tmp_path / "results.json").read_text())
    results["cycles"] = {
        "ww_deps": False, "components": 4, "largest_component": 3,
        "transactions_in_components": 9, "elle": "ok", "elle_seconds": 0.8,
    }  # fmt: skip
    (tmp_path / "results.json").write_text(json.dumps(results))
    page = render(tmp_path)
    assert "Dependency cycles (Elle)" in page
    assert "Spark found <strong>4</strong>" in page and "not inferred in this run" in page
    results["cycles"] = {
        "ww_deps": True, "components": 0, "largest_component": 0,
        "transactions_in_components": 0, "elle": "Elle is not available (x)",
    }  # fmt: skip
    (tmp_path / "results.json").write_text(json.dumps(results))
    page = render(tmp_path)
    assert "no cycle, and Elle was not needed" in page and "Elle is not available (x)" in page
    build_run(tmp_path / "queue", "valid")
    assert "Dependency cycles" not in render(tmp_path / "queue")


def test_a_shrunk_run_says_what_was_cut_from_which_run_and_its_rate(tmp_path: Path) -> None:
    from kafka_chaos.reports.index import write_index

    store = tmp_path / "store"
    source, shrunk = store / "t" / "20261127T010000Z", store / "t-shrink" / "20261127T020000Z"
    for run in (source, shrunk):
        run.mkdir(parents=True)
        build_run(run, "invalid", expected="invalid")
    write_report(source)
    log = {
        "source": str(source), "anomaly": ["lost-write"], "stop_reason": "budget spent",
        "start": {"size": {"faults": 3, "seconds": 60.0, "operations": 30000}},
        "result": {"size": {"faults": 1, "seconds": 25.0, "operations": 12500}},
        "steps": [
            {"what": "drop fault(s) #0 kill at 5s", "kept": False, "runs": [{"failed": False}]},
            {"what": "drop fault(s) #2 kill at 45s", "kept": True,
             "runs": [{"failed": True}, {"failed": False}, {"failed": True}]},
        ],
    }  # fmt: skip
    (shrunk / "shrink.json").write_text(json.dumps(log))
    page = render(shrunk)
    banner = re.sub(r"\s+", " ", page[page.index('id="shrunk"') :].split("</div>")[0])
    assert "../../t/20261127T010000Z/report.html" in banner
    assert "3 fault(s), 60.0 s, 30000 operations → 1 fault(s), 25.0 s, 12500 operations" in banner
    assert "in 4 runs (budget spent)" in banner and "Cut: drop fault(s) #2 kill at 45s." in banner
    assert "It failed 2 of 3 (67%; 95% interval 21-94%) (the search&#39;s runs)" in banner
    # Confirming runs, when there are some, give the rate: the search's stop early.
    log["confirm"] = {"key": "k", "runs": [{"failed": True}] + [{"failed": False}] * 4}
    (shrunk / "shrink.json").write_text(json.dumps(log))
    banner = re.sub(r"\s+", " ", render(shrunk).split('id="shrunk"')[1].split("</div>")[0])
    assert "It failed 1 of 5 (20%; 95% interval 4-62%) (confirming runs)" in banner
    index = write_index(store).read_text()
    assert 'shrunk from <a href="t/20261127T010000Z/report.html">' in index
    assert 'id="shrunk"' not in render(source)
