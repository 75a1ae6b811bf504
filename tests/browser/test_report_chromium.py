"""The report and index open in a real headless chromium without console errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_chaos.reports.index import write_index
from kafka_chaos.reports.render import write_report
from report_fixtures import build_run

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def test_report_renders_without_console_errors(tmp_path: Path, browser) -> None:
    run = tmp_path / "store" / "lost-ack" / "20261122T100000Z"
    sim = build_run(run, "invalid", expected="invalid", xss=True)
    page = write_report(run)

    browser.navigate(page.as_uri())

    assert browser.console_errors() == []
    assert browser.evaluate("document.title").startswith("invalid")
    # the inlined stylesheet was applied (an escaped <style> silently falls back to serif)
    assert "DejaVu Sans" in browser.evaluate("getComputedStyle(document.body).fontFamily")
    banner = browser.evaluate(
        "(() => { const b = document.querySelector('#verdict');"
        " const r = b.getBoundingClientRect();"
        " return {text: b.innerText, h: r.height, cls: b.className}; })()"
    )
    assert "INVALID" in banner["text"] and "expectation held" in banner["text"]
    assert banner["h"] > 30 and "v-invalid" in banner["cls"]
    lost = browser.evaluate(
        "(() => { const a = document.querySelector('#anomaly-lost-write');"
        " return {text: a.innerText, h: a.getBoundingClientRect().height,"
        " lostRows: a.querySelectorAll('tr.lost').length}; })()"
    )
    value = sim.acked[sim.lost][0]
    assert lost["h"] > 50 and lost["lostRows"] == 1
    assert str(value) in lost["text"]
    # the injected script stayed text: it never ran and never became an element
    assert browser.evaluate("document.querySelectorAll('script').length") == 0
    assert "<script>alert(1)</script>" in browser.evaluate("document.body.innerText")
    assert browser.evaluate("document.querySelectorAll('svg.chart').length") >= 4
    browser.screenshot(ARTIFACTS / "report-screenshot.png")


def test_index_filter_works_without_console_errors(tmp_path: Path, browser) -> None:
    store = tmp_path / "store"
    for kind, stamp in (
        ("valid", "20261120T010000Z"),
        ("invalid", "20261121T010000Z"),
        ("unknown", "20261122T010000Z"),
    ):
        run = store / "lost-ack" / stamp
        build_run(run, kind, seconds=12)
        write_report(run)
    index = write_index(store)

    browser.navigate(index.as_uri())
    visible = "[...document.querySelectorAll('tr.run')].filter(r => r.offsetParent).length"
    assert browser.evaluate(visible) == 3
    browser.evaluate("document.querySelector('label[for=f-invalid]').click()")
    assert browser.evaluate(visible) == 1
    assert browser.evaluate("location.hash") == "#invalid"
    browser.evaluate("document.querySelector('label[for=f-all]').click()")
    assert browser.evaluate(visible) == 3
    assert browser.console_errors() == []
    browser.screenshot(ARTIFACTS / "index-screenshot.png")

    # the filter is radio buttons + CSS: it must work with JavaScript disabled too
    browser.send("Emulation.setScriptExecutionDisabled", {"value": True})
    browser.navigate(index.as_uri())
    browser.send("Emulation.setScriptExecutionDisabled", {"value": False})  # to query the DOM
    assert browser.evaluate("location.hash") == ""
    assert browser.evaluate(visible) == 3
    browser.send("Emulation.setScriptExecutionDisabled", {"value": True})
    click = browser.evaluate_point("label[for=f-valid]")
    browser.send(
        "Input.dispatchMouseEvent",
        {"type": "mousePressed", **click, "button": "left", "clickCount": 1},
    )
    browser.send(
        "Input.dispatchMouseEvent",
        {"type": "mouseReleased", **click, "button": "left", "clickCount": 1},
    )
    browser.send("Emulation.setScriptExecutionDisabled", {"value": False})
    assert browser.evaluate(visible) == 1
    assert browser.evaluate("location.hash") == ""  # no script ran to sync the hash
