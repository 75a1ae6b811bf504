"""The unclean-election report in a real headless chromium: the verdict is valid (the
loss is a warning: unclean election's doc allows it), yet the banner says how many
acknowledged messages were lost and names the warnings, the card names the setting
that allows the loss, the truncated run of offsets is one range with its examples one
click away, and the replica section and truncation mark are there.

The run directory is the unclean election's signature written as a history (a
leader acknowledges offsets 20-59 alone, the new leader writes other values there),
judged by the real checker (Spark), with the replica verification a real run writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka_chaos.checkers.api import check_history
from kafka_chaos.reports.render import write_report

from kafka_chaos.options import build_spec
from kafka_chaos.scenarios import scenario_layer
from testkit.builder import HistoryBuilder

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
NS = 1_000_000_000
LOST = range(20, 60)  # offsets of partition 0 the deposed leader acknowledged alone


def unclean_history(b: HistoryBuilder) -> None:
    b.assign(10, None, [("t", 0), ("t", 1)])
    for v in range(20):
        b.send(1, v, 0, v)
        b.send(1, 200 + v, 1, v)
    b.poll(10, [("t", 0, v, v) for v in range(20)] + [("t", 1, v, 200 + v) for v in range(20)])
    b.advance(5)
    b.fault("unclean-election", 0, "start", ["n1"])
    for o in LOST:
        b.send(1, o, 0, o)  # acknowledged by n1 alone
    b.poll(10, [("t", 0, o, o) for o in LOST])
    b.advance(10)
    for i, o in enumerate(LOST):
        b.send(2, 100 + i, 0, o)  # the stale follower, now leader, reuses the offsets
    b.fault("unclean-election", 0, "end", ["n1"])
    b.assign(99, None, [("t", 0), ("t", 1)])
    drained = [("t", 0, v, v) for v in range(20)] + [
        ("t", 0, o, 100 + i) for i, o in enumerate(LOST)
    ]
    b.poll(99, drained + [("t", 1, v, 200 + v) for v in range(20)], final=True)
    b.drain_bounds(99, "t", 0, 0, 60)
    b.drain_bounds(99, "t", 1, 0, 20)


def replicas_json(truncated_at_s: float) -> dict:
    live = {"source": "live", "fault_id": None, "agree": True, "first_divergence": None,
            "diverged_offsets": 0, "diverged_ranges": [], "lost_values": 0,
            "uncommitted_offsets": 0, "raw": "replicas/n2-dump-log-segments.txt.gz",
            "error": None}  # fmt: skip
    copy = {**live, "node": "n1", "broker_id": 1, "source": "before-rejoin", "fault_id": 0,
            "log_start": 0, "log_end": 60, "high_watermark": 60, "agree": False,
            "first_divergence": {"offset": 20, "here": "20", "leader": "100"},
            "diverged_offsets": 40, "diverged_ranges": [[20, 59]], "lost_values": 40}  # fmt: skip
    parts = [
        {"partition": p, "replicas": [1, 2, 3], "leader": 2, "isr": [2, 3, 1], "in_sync": True,
         "high_watermark": hw, "agree": True, "diverged": p == 0, "error": None,
         "compared": [{**live, "node": f"n{n}", "broker_id": n, "log_start": 0, "log_end": hw}
                      for n in (1, 2, 3)] + ([copy] if p == 0 else [])}
        for p, hw in ((0, 60), (1, 20))
    ]  # fmt: skip
    truncation = {"node": "n1", "broker_id": 1, "partition": 0, "offset": 20,
                  "high_watermark": 60, "time_ms": 1795581147225, "history_s": truncated_at_s,
                  "line": "Truncating t-0 to offset 20 below high watermark 60"}  # fmt: skip
    return {"topic": "t", "complete": True, "error": None, "partitions": parts,
            "truncations": [truncation]}  # fmt: skip


@pytest.fixture(scope="module")
def unclean_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("store") / "unclean-leader-election" / "20261125T050000Z"
    run.mkdir(parents=True)
    b = HistoryBuilder(step_ms=50)
    unclean_history(b)
    b.write(run / "history.jsonl")
    spec = build_spec(scenario_layer("unclean-leader-election"))
    spec.save(run / "config.json", {"topic_name_used": "t"})
    end_s = b.time_ns / NS
    with open(run / "cluster-state.jsonl", "w") as fh:
        for s in range(int(end_s) + 2):
            leader = 1 if s < 12 else 2
            isr = [1, 2, 3] if s < 5 or s > 20 else [leader]
            fh.write(json.dumps({"time": s * NS, "controller": 3, "error": None, "partitions": [
                {"topic": "t", "partition": p, "leader": leader, "replicas": [1, 2, 3],
                 "isr": isr} for p in (0, 1)]}) + "\n")  # fmt: skip
    (run / "replicas.json").write_text(json.dumps(replicas_json(end_s - 1.0)))
    config = json.loads((run / "config.json").read_text())
    check_history(run / "history.jsonl", config, out=run / "results.json")
    write_report(run)
    return run


def test_the_unclean_report_leads_with_the_loss(unclean_run: Path, browser) -> None:
    results = json.loads((unclean_run / "results.json").read_text())
    assert results["summary"]["acked_lost"] == len(LOST)
    browser.navigate((unclean_run / "report.html").as_uri())
    assert browser.console_errors() == []
    assert results["verdict"] == "valid"
    assert results["checks"]["acked-lost"]["severity"] == "warning"
    banner = browser.evaluate("document.querySelector('#verdict').innerText")
    assert "VALID" in banner and "INVALID" not in banner
    assert (
        f"Kafka lost {len(LOST)} of {results['summary']['acked']} acknowledged messages, "
        "as this run's settings allow (a warning)." in banner
    )
    assert "0 were duplicated" in banner and "0 were read out of order" in banner
    assert "warnings, shapes this run's settings allow, were found (acked-lost" in banner

    lost = browser.evaluate(
        "(() => { const a = document.querySelector('#anomaly-acked-lost');"
        " const d = a.querySelector('details.range');"
        " const before = d.querySelector('.example').checkVisibility();"
        " d.open = true;"
        " return {summary: d.querySelector('summary').innerText, before,"
        " after: d.querySelector('.example').checkVisibility(),"
        " ops: d.querySelectorAll('table.ops tr').length,"
        " fault: d.querySelector('table.ops').innerText}; })()"
    )
    assert lost["summary"].startswith("offsets 20–59 of partition 0")
    assert f"({len(LOST)} values" in lost["summary"]
    assert lost["before"] is False and lost["after"] is True  # one click away
    assert lost["ops"] > 1 and "unclean-election n1" in lost["fault"]
    card = browser.evaluate("document.querySelector('#anomaly-acked-lost').innerText")
    assert "Allowed by unclean.leader.election.enable=true" in card

    replicas = browser.evaluate("document.querySelector('#replicas').innerText")
    assert "n1's log before it rejoined held other values" in replicas
    assert "offsets 20–59 of partition 0" in replicas
    mark = browser.evaluate(
        "(() => { const m = document.querySelector('#partitions svg polygon.truncation');"
        " return m && {tip: m.textContent, w: m.getBoundingClientRect().width}; })()"
    )
    assert mark and mark["w"] > 0
    assert "n1 truncated partition 0 to offset 20 (below high watermark 60)" in mark["tip"]
