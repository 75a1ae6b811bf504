"""Building blocks of the report: history aggregation, cluster state, SVG, explanations."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from kafka_chaos.checkers import catalog
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.reports import svg
from kafka_chaos.reports.cluster_state import read_cluster_state
from kafka_chaos.reports.explanations import explain, hints
from kafka_chaos.reports.render import dense_timeline
from kafka_chaos.reports.timeline import percentile, summarize_history
from markupsafe import Markup
from report_fixtures import NS, XSS, build_run

MS = 1_000_000


def write_ops(path: Path, ops: list[tuple[int, object, str, str, object]]) -> None:
    with open(path, "w") as fh:
        for i, (t, process, type_, f, value) in enumerate(ops):
            line = {"index": i, "time": t, "process": process, "type": type_, "f": f}
            fh.write(json.dumps({**line, "value": value}) + "\n")


def test_summary_counts_match_an_independent_count(tmp_path: Path) -> None:
    sim = build_run(tmp_path, "invalid", results=False, optional=False)
    summary = summarize_history(tmp_path / "history.jsonl")
    expected: Counter = Counter()
    for line in sim.lines:
        second = line["time"] // NS
        if line["f"] == "send" and line["type"] != "invoke":
            expected[(second, {"ok": "acked", "fail": "failed"}.get(line["type"], "info"))] += 1
        if line["f"] == "poll" and line["type"] == "ok":
            expected[(second, "polled")] += len(line["value"]["records"])
    got = Counter()
    for row in summary.timeline:
        for key in ("acked", "failed", "info", "polled"):
            if row[key]:
                got[(row["t"], key)] = row[key]
    assert got == expected
    assert summary.ops == len(sim.lines) and summary.problem is None
    windows = [(f["f"], round(f["start_s"]), round(f["end_s"])) for f in summary.faults]
    assert windows == [("kill", 10, 18), ("partition", 22, 26)]


def test_latency_percentiles_and_unhealed_faults(tmp_path: Path) -> None:
    ops: list = [(0, "nemesis", "info", "pause", {"phase": "start", "id": 7, "targets": ["n3"]})]
    t = 1 * MS
    for i, lat in enumerate(range(1, 101)):  # latencies 1..100 ms, all acked in second 0
        ops.append((t, 0, "invoke", "send", {"topic": "x", "key": "k", "value": i}))
        ops.append((t + lat * MS, 0, "ok", "send", {"topic": "x", "value": i, "offset": i}))
        t += lat * MS + 1
    ops.append((2 * NS + 5, 1, "info", "crash", {"reason": "test"}))
    path = tmp_path / "h.jsonl"
    write_ops(path, ops)
    summary = summarize_history(path)
    first = summary.timeline[0]
    lat_rows = [r for r in summary.timeline if r["acked"]]
    assert sum(r["acked"] for r in lat_rows) == 100
    assert first["lat_max_ms"] <= 100
    assert max(r["lat_max_ms"] for r in lat_rows) == 100.0
    assert summary.faults[0]["unhealed"] and summary.faults[0]["end_s"] == summary.duration_s


def test_history_written_by_the_real_writer_is_read(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path) as w:
        w.append(0, "invoke", "send", {"topic": "t", "key": "k", "value": 1})
        w.append(0, "ok", "send", {"topic": "t", "key": "k", "value": 1, "offset": 0})
    with open(path, "a") as fh:
        fh.write('{"index": 2, "ti')  # a line cut short by a crash
    summary = summarize_history(path)
    assert summary.ops == 2 and summary.problem is None
    assert summary.timeline[0]["acked"] == 1


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=200), st.floats(1, 100))
def test_percentile_is_an_element_and_monotone(vals: list[float], q: float) -> None:
    vals.sort()
    p = percentile(vals, q)
    assert p in vals and p <= percentile(vals, 100) == vals[-1]
    assert math.isnan(percentile([], 50))


def test_dense_timeline_fills_gaps_and_downsamples() -> None:
    rows = [{"t": 0, "acked": 10, "lat_p99_ms": 5.0}, {"t": 3, "acked": 20, "lat_p99_ms": 9.0}]
    dense = dense_timeline(rows)
    assert [r["t"] for r in dense] == [0, 1, 2, 3]
    assert dense[1]["acked"] == 0 and dense[1]["lat_p99_ms"] is None
    long = dense_timeline([{"t": t, "acked": 2} for t in range(10_000)])
    assert len(long) <= 1500 and all(r["acked"] == 2 for r in long)


def test_cluster_state_collapses_samples_into_segments(tmp_path: Path) -> None:
    build_run(tmp_path, "valid", results=False)
    path = tmp_path / "cluster-state.jsonl"
    with open(path, "a") as fh:
        fh.write("not json\n")
    state = read_cluster_state(path)
    assert state.samples == 31 and state.problems == ["line 32: skipped (JSONDecodeError)"]
    p1 = state.partitions[("chaos", 1)]  # led by broker 2, which is killed 10s..18s
    assert [(s.start, s.leader, len(s.isr)) for s in p1] == [(0, 2, 3), (10, 3, 2), (20, 2, 3)]
    assert p1[1].under_replicated and not p1[0].under_replicated
    assert state.controllers == [2, 3] and state.end_s == 30
    p1_summary = state.summary()[1]
    assert p1_summary == {
        "partition": "p1",
        "leader_changes": 2,
        "under_replicated_s": 10,
        "leaderless_s": 0,
        "min_isr": 2,
        "replicas": 3,
    }


def test_svg_tag_escapes_attributes_and_text() -> None:
    out = svg.tag("text", {"x": 1.25, "class": '"><script>'}, XSS, svg.tag("title", None, XSS))
    assert isinstance(out, Markup)
    assert "<script" not in out and out.count("&lt;script&gt;") == 3
    assert 'x="1.2"' in out or 'x="1.3"' in out


@given(st.floats(0, 1e7), st.floats(0, 1e7))
def test_nice_ticks_cover_the_range(a: float, b: float) -> None:
    lo, hi = min(a, b), max(a, b)
    ticks = svg.nice_ticks(lo, hi)
    assert ticks[0] <= lo + 1e-9 and ticks[-1] >= hi - 1e-6 * max(hi, 1)
    assert ticks == sorted(ticks) and len(ticks) <= 12


def test_line_chart_breaks_lines_at_missing_values() -> None:
    chart = svg.line_chart(
        [0, 1, 2, 3, 4],
        [("p99", [1.0, 2.0, None, 4.0, 5.0], "#000")],
        title="t",
        bands=[svg.Band(1, 2, "kill n1", "fault")],
    )
    assert chart.count("<polyline") == 2 and chart.count('class="fault"') == 1


def test_partition_timeline_marks_under_replication() -> None:
    segs = [svg.Segment(0, 5, 1, [1, 2, 3], [1, 2, 3]), svg.Segment(5, 9, None, [3], [1, 2, 3])]
    chart = svg.partition_timeline([("t/0", segs)], title="x", x_range=(0, 10))
    assert chart.count('class="urp"') == 1 and "leader none" in chart


def test_every_check_explains_itself_to_every_reader() -> None:
    for check in catalog.every_check():
        texts = (check.title, check.explanation, check.finds, check.severity_doc, check.meaning)
        assert all(t.strip() for t in texts), check.name
        assert explain(check.name).meaning == check.meaning
    assert explain("made-up", "from the checker").meaning == "from the checker"


def test_hints_follow_the_run_config() -> None:
    cfg = {"producer": {"acks": "1", "enable_idempotence": False}, "consumer": {"mode": "assign"}}
    assert any("acks=1" in h for h in hints("lost-write", cfg))
    assert any("Idempotence was disabled" in h for h in hints("duplicate", cfg))
    assert hints("poll-skip", cfg) == []
    assert hints("lost-write", {"producer": {"acks": "all"}}) == []
    # The setting that allows a loss is named, as the checks read it (topic.config wins).
    unclean = {"topic": {"config": {"unclean.leader.election.enable": "true"}}}
    for check in ("lost-write", "unseen", "acked-lost", "inconsistent-offsets"):
        assert any(
            h.startswith("Allowed by unclean.leader.election.enable=true")
            for h in hints(check, unclean)
        ), check
    java = {"producer": {"client": "java"}}
    assert any(
        h.startswith("Allowed by the Java producer") for h in hints("duplicate-unacked", java)
    )
    assert hints("duplicate-unacked", {"producer": {"client": "librdkafka"}}) == []
