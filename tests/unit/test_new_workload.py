"""Adding a workload is one file: ``_workload_example`` goes all the way.

Registered from here, and known to no product file, its spec section loads
and is validated, its option reaches the CLI, its own line kind is
ingested into rows and its lines are recognised in a history that comes
without its config, its check judges a hand-written history with Spark,
and the run's report shows its section.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _workload_example import CHECK, DECLARATION, LINE, NAME, REGRESSED, WatermarkSpec
from kafka_chaos.checkers import catalog, history_workload
from kafka_chaos.checkers.api import check_history
from kafka_chaos.checkers.ingest import convert, line_rows
from kafka_chaos.harness.errors import ConfigError, HistoryError
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.reports.render import render_report
from kafka_chaos.workloads import registry
from kafka_chaos.workloads.declared_parts import Column, LineKind
from kafka_chaos.workloads.registry import Declaration

from kafka_chaos import options
from testkit.builder import HistoryBuilder

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def registered() -> Iterator[None]:
    registry.register(NAME, DECLARATION)
    try:
        yield
    finally:
        registry.unregister(NAME)


def _history(path: Path) -> Path:
    b = HistoryBuilder()
    for offset in (3, 7, 5, 9):  # the third read went back
        b.op(0, "ok", LINE, {"topic": "t", "partition": 1, "offset": offset})
    b.op(0, "ok", LINE, {"topic": "t", "partition": 2, "offset": 4})
    return b.write(path)


def test_its_check_judges_a_history_and_its_section_is_reported(spark, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    history = _history(run / "history.jsonl")
    spec = TestSpec.from_dict({"workload": NAME, LINE: {"every_s": 0.5}})
    spec.save(run / "config.json")
    config = json.loads((run / "config.json").read_text())
    assert config[LINE] == {"every_s": 0.5}

    results = check_history(history, config, run / "results.json")
    assert list(results["checks"]) == [CHECK]  # its family alone judges it
    found = results["checks"][CHECK]
    assert (found["count"], found["severity"], results["verdict"]) == (1, "error", "invalid")
    assert [(ex["partition"], ex["offset"], ex["before"]) for ex in found["examples"]] == [
        (1, 5, 7)
    ]

    page = render_report(run)
    assert '<section id="watermarks">' in page and "High watermarks" in page
    assert "read every 0.5 s; 1 read lower than before." in page
    assert REGRESSED.title in page

    # Without its config, the lines say which workload wrote them.
    bare = tmp_path / "bare"
    bare.mkdir()
    alone = check_history(_history(bare / "history.jsonl"), {}, from_lines=True)
    assert list(alone["checks"]) == [CHECK] and alone["checks"][CHECK]["count"] == 1


def test_its_line_kind_is_validated_and_made_into_rows(tmp_path: Path) -> None:
    line = {"index": 0, "time": 1, "process": 0, "type": "ok", "f": LINE,
            "value": {"topic": "t", "partition": 0, "offset": 12}}  # fmt: skip
    rows = line_rows.rows_of(line_rows.checked(line, 1, tmp_path))
    assert [(r["f"], r["topic"], r["partition"], r["offset"]) for r in rows] == [(LINE, "t", 0, 12)]
    assert line_rows.kind_of(rows[0]) == "control"
    bad = {**line, "value": {"topic": "t", "partition": "0", "offset": 12}}
    with pytest.raises(HistoryError, match=r"line 3: watermark ok: needs topic \(str\), partition"):
        line_rows.checked(bad, 3, tmp_path)
    with pytest.raises(HistoryError, match="line 4: watermark ok needs a value object"):
        line_rows.checked({**line, "value": None}, 4, tmp_path)


def _mixed_history(path: Path) -> Path:
    """Its lines among a queue workload's: a send, a poll, a fault, a commit."""
    b = HistoryBuilder()
    b.op(1, "invoke", "send", {"topic": "t", "value": 1})
    b.op(0, "ok", LINE, {"topic": "t", "partition": 1, "offset": 3})
    b.op(1, "ok", "send", {"topic": "t", "value": 1, "partition": 1, "offset": 3})
    b.op("nemesis", "info", "kill", {"phase": "start", "id": 1, "targets": ["n1"]})
    b.op(0, "ok", LINE, {"topic": "t", "partition": 1, "offset": 4})
    b.op(2, "ok", "poll", {"records": [{"topic": "t", "partition": 1, "offset": 3, "value": 1}]})
    b.op(2, "ok", "commit", {"group": "g", "offsets": [["t", 1, 4]]})
    return b.write(path)


def test_its_lines_are_ingested_beside_the_queue_lines(tmp_path: Path) -> None:
    rows = tmp_path / "rows"
    convert.convert(_mixed_history(tmp_path / "history.jsonl"), rows)
    table = convert.read_rows(rows).to_pylist()
    marks = sorted((r["index"], r["kind"], r["partition"], r["offset"]) for r in table
                   if r["f"] == LINE)  # fmt: skip
    assert marks == [(1, "control", 1, 3), (4, "control", 1, 4)]
    kinds = ["commit", "control", "line", "poll", "record", "topic"]
    assert sorted({r["kind"] for r in table}) == kinds


def test_its_lines_are_recognised_without_a_config(tmp_path: Path) -> None:
    rows = tmp_path / "rows"
    history = _history(tmp_path / "history.jsonl")
    convert.convert(history, rows)
    judged = history_workload.config_for(rows, history, {}, from_lines=True)
    assert judged == {"workload": NAME, LINE: {"every_s": 1.0}}
    with pytest.raises(ConfigError, match="its lines are a watermark history but its config says"
                       " queue; check it with the run's own config"):  # fmt: skip
        history_workload.config_for(rows, history, {"workload": "queue"}, from_lines=False)
    own = {"workload": NAME}
    assert history_workload.config_for(rows, history, own, from_lines=False) is own
    # A queue history is still what it was: nothing of this workload's is seen there.
    queue_rows = tmp_path / "queue-rows"
    queue = tmp_path / "queue.jsonl"
    b = HistoryBuilder()
    b.op(2, "ok", "poll", {"records": [{"topic": "t", "partition": 1, "offset": 3, "value": 1}]})
    convert.convert(b.write(queue), queue_rows)
    assert history_workload.config_for(queue_rows, queue, {}, from_lines=True) == {}
    with pytest.raises(ConfigError, match="its lines are a queue history but its config says "
                       "watermark"):  # fmt: skip
        history_workload.config_for(queue_rows, queue, own, from_lines=False)


def test_its_option_and_section_reach_the_spec() -> None:
    parser = argparse.ArgumentParser()
    options.add_run_options(parser)
    args = parser.parse_args(["--workload", NAME, "--watermark-every", "0.25"])
    spec = options.build_spec(options.cli_overrides(args))
    assert spec.section(LINE) == WatermarkSpec(0.25)
    assert TestSpec().section(LINE) == WatermarkSpec()  # unset: the defaults
    zero = parser.parse_args(["--workload", NAME, "--watermark-every", "0"])
    with pytest.raises(ConfigError, match="watermark.every_s must be positive, not 0.0"):
        options.build_spec(options.cli_overrides(zero))


def test_its_family_judges_only_its_runs() -> None:
    assert [c.name for c in catalog.checks_for({"workload": NAME})] == [CHECK]
    assert CHECK not in [c.name for c in catalog.checks_for({"workload": "queue"})]
    registry.validate(NAME)  # its class is found from its declaration alone


def test_it_leaves_with_its_registration() -> None:
    registry.unregister(NAME)
    try:
        assert NAME not in registry.names() and registry.line_kind(LINE) is None
        with pytest.raises(ConfigError, match=rf"config\.{LINE}: unknown option"):
            TestSpec.from_dict({LINE: {}})
        assert catalog.find(CHECK) is None
    finally:
        registry.register(NAME, DECLARATION)
    with pytest.raises(ValueError, match="exists already"):
        registry.register(NAME, DECLARATION)


def test_no_product_file_names_it() -> None:
    product = ["harness", "checkers", "workloads", "nemeses", "reports", "kafka_chaos"]
    found = subprocess.run(["git", "grep", "-l", "-e", NAME, "-e", CHECK, "--", *product],
                           cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    assert found.returncode == 1 and not found.stdout, found.stdout


def test_a_line_kind_that_needs_columns_ingest_lacks_is_refused(tmp_path: Path) -> None:
    """The rows table's shape is fixed when ingest loads: a later kind may only
    fill it, and one that needs more is refused in one line, not dropped."""
    wider = LineKind("widened", DECLARATION.line_kinds[0].problem, DECLARATION.line_kinds[0].rows,
                     columns=(Column("width", "int64", ("control",)),))  # fmt: skip
    registry.register("widened-example", Declaration(DECLARATION.factory, (), line_kinds=(wider,)))
    try:
        with pytest.raises(ValueError, match="line kind 'widened' needs width, unknown to ingest"):
            convert.convert(_history(tmp_path / "history.jsonl"), tmp_path / "rows")
    finally:
        registry.unregister("widened-example")
