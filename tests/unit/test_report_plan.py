"""The report's banner: faults that ran off plan, and why a verdict is unknown."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from kafka_chaos.reports.render import write_report
from report_fixtures import assert_self_contained, build_run

OFF_PLAN = {
    "tolerance_s": 1.0,
    "count": 2,
    "worst_deviation_s": 3.25,
    "faults": [
        {
            "id": 1,
            "f": "kill",
            "targets": ["n2"],
            "planned_start_s": 10.0,
            "realised_start_s": 13.25,
            "planned_end_s": 18.0,
            "realised_end_s": 18.1,
            "deviation_s": 3.25,
            "healed": True,
            "indices": [800, 1601],
        },
        {
            "id": 2,
            "f": "partition",
            "targets": ["n1"],
            "planned_start_s": 22.0,
            "realised_start_s": 22.0,
            "planned_end_s": 26.0,
            "realised_end_s": None,
            "deviation_s": 0.0,
            "healed": False,
            "indices": [2000],
        },
    ],
}


def _edit_results(run: Path, **fields: Any) -> None:
    results = json.loads((run / "results.json").read_text())
    results.update(fields)
    (run / "results.json").write_text(json.dumps(results))


def _banner(page: str) -> str:
    return page[page.index('<header id="verdict"') : page.index("</header>")]


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)))


def test_banner_warns_that_faults_ran_off_plan_and_keeps_the_verdict(tmp_path: Path) -> None:
    build_run(tmp_path, "valid")
    _edit_results(tmp_path, faults_off_plan=OFF_PLAN)
    page = write_report(tmp_path).read_text()
    banner = _banner(page)
    assert 'class="banner v-valid"' in banner  # a flag, not an anomaly
    text = _text(banner)
    assert "2 faults ran off plan: started or ended more than 1.0 s away from the schedule" in text
    assert "or never healed (1); worst deviation 3.250 s." in text
    assert (
        "The availability figures (throughput and latency during faults, acked/s before and "
        "during each fault) therefore no longer mean what the plan says." in text
    )
    assert "The verdict is unaffected." in text and 'href="#off-plan"' in banner
    listed = page[page.index('id="off-plan"') :]
    listed = _text(listed[: listed.index("</table>")])
    assert "1 kill n2 10.000 13.250 18.000 18.100 3.250 800, 1601" in listed
    assert "2 partition n1 22.000 22.000 26.000 never healed 0.000 2000" in listed
    assert_self_contained(page)


def test_no_warning_when_every_fault_ran_to_plan(tmp_path: Path) -> None:
    build_run(tmp_path, "valid")
    _edit_results(tmp_path, faults_off_plan={**OFF_PLAN, "count": 0, "faults": []})
    page = write_report(tmp_path).read_text()
    assert 'id="plan-warning"' not in page and 'id="off-plan"' not in page


def test_results_of_an_older_version_flag_nothing(tmp_path: Path) -> None:
    build_run(tmp_path, "valid")  # results.json without faults_off_plan
    page = write_report(tmp_path).read_text()
    assert "ran off plan" not in page


def test_without_results_the_plan_is_read_from_the_history(tmp_path: Path) -> None:
    build_run(tmp_path, "valid", results=False)
    lines = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines()]
    for line in lines:
        value = line["value"]
        if line["process"] == "nemesis" and value["id"] == 1:  # kill n2, planned 10-18 s
            planned = 10.0 if value["phase"] == "start" else 18.0
            at = 11.5 if value["phase"] == "start" else 18.0
            value.update(planned_s=planned, at_s=at)
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    page = write_report(tmp_path).read_text()
    text = _text(_banner(page))
    assert "1 fault ran off plan" in text and "worst deviation 1.500 s" in text
    assert "never healed" not in text


def test_unknown_banner_gives_the_reasons(tmp_path: Path) -> None:
    build_run(tmp_path, "valid")
    reasons = [
        "no send was acknowledged: without an acknowledged write nothing was promised, "
        "so a clean history proves nothing",
        "all 2 fault(s) failed to take effect (each carries an error): the run never "
        "tested the faults it planned",
    ]
    _edit_results(tmp_path, verdict="unknown", unknown_reasons=reasons)
    banner = _text(_banner(write_report(tmp_path).read_text()))
    assert "UNKNOWN" in banner
    assert f"The checkers could not decide: {reasons[0]}; {reasons[1]}." in banner
