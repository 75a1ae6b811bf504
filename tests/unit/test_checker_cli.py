"""`kafka-chaos check`: exit codes, --json, run directories, malformed histories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka_chaos.checkers.ingest.convert import scan_for_bad_line
from kafka_chaos.harness.errors import HistoryError
from kafka_chaos.harness.spec import TestSpec

from kafka_chaos.cli import main
from testkit.builder import HistoryBuilder


def _valid(b: HistoryBuilder) -> None:
    b.subscribe(10, "g", ["t"])
    b.rebalance(10, "g", assigned=[("t", 0)])
    b.fault("kill", 1, "start", ["n1"])
    for v in range(4):
        b.send(1, v, 0, v)
    b.fault("kill", 1, "end", ["n1"])
    b.poll(10, [("t", 0, v, v) for v in range(4)])
    b.commit(10, "g", [("t", 0, 4)])


def _write(tmp_path: Path, name: str, extra=None) -> Path:
    b = HistoryBuilder()
    _valid(b)
    if extra:
        extra(b)
    return b.write(tmp_path / name)


def _drained(b: HistoryBuilder) -> None:
    b.crash(10)
    b.assign(99, None, [("t", 0)])
    b.poll(99, [("t", 0, v, v) for v in range(4)], final=True)


def _lost(b: HistoryBuilder) -> None:
    b.send(1, 9, 0, 4)
    b.send(2, 10, 0, 5)
    b.crash(10)
    b.assign(99, None, [("t", 0)])
    b.poll(99, [("t", 0, 5, 10)], final=True)


@pytest.mark.slow
def test_run_dir_valid_writes_results_and_exits_0(spark, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    _write(run, "history.jsonl", _drained)
    spec = TestSpec()
    spec.checker.availability_min_rate = 0.001
    spec.save(run / "config.json", {"versions": {"kafka": "4.4.0"}})
    assert main(["check", str(run)]) == 0
    out = capsys.readouterr().out
    assert "verdict" in out and "valid" in out
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"] == "valid" and results["final_drain"] is True
    assert results["ops"] == 21 and results["history"] == "history.jsonl"
    # The drain found every acknowledged value: nothing lost, even without drain lines.
    assert results["summary"] == {"acked": 4, "acked_lost": 0, "duplicated": 0, "reordered": 0}
    assert "acknowledged: 4   lost: 0   duplicated: 0   read out of order: 0" in out
    assert results["checks"]["availability"]["valid"] is True
    avail = results["stats"]["availability"]
    assert avail["faults"][0]["f"] == "kill" and avail["faults"][0]["rate_during"] > 0
    assert sum(r["acked"] for r in avail["timeline"]) == 4
    assert results["stats"]["realtime_lag"]["count"] == 4
    assert (run / "history.parquet" / "_SUCCESS").exists()


@pytest.mark.slow
def test_parquet_cache_of_another_format_is_rebuilt_and_refused_as_input(spark, tmp_path, capsys):
    path = _write(tmp_path, "h.jsonl", _drained)
    stale = tmp_path / "h.parquet"
    spark.createDataFrame([(1,)], "x int").write.parquet(str(stale))  # an older shape
    assert main(["check", str(stale)]) == 3  # refused: names the format it wants
    assert "not a Parquet history of this kafka-chaos version" in capsys.readouterr().err
    assert main(["check", str(path)]) == 0  # the stale cache is rebuilt, not read
    assert main(["check", str(stale)]) == 0  # now current: judged as it is


@pytest.mark.slow
def test_invalid_history_exits_1_and_json_names_the_anomaly(spark, tmp_path, capsys):
    path = _write(tmp_path, "h.jsonl", _lost)
    assert main(["check", str(path), "--json", "--examples", "1"]) == 1
    results = json.loads(capsys.readouterr().out)
    lost = results["checks"]["lost-write"]
    assert results["verdict"] == "invalid"
    assert (lost["count"], lost["severity"], lost["valid"]) == (1, "error", False)
    assert len(lost["examples"]) == 1 and lost["examples"][0]["value"] == 9
    assert lost["explanation"]


@pytest.mark.slow
def test_no_drain_with_unread_acks_exits_2(spark, tmp_path, capsys):
    path = _write(tmp_path, "h.jsonl", lambda b: b.send(1, 9, 0, 4))
    assert main(["check", str(path), "--json"]) == 2
    results = json.loads(capsys.readouterr().out)
    assert results["verdict"] == "unknown" and results["checks"]["unseen"]["valid"] == "unknown"


@pytest.mark.parametrize(
    "bad, message",
    [
        ('{"index": 3, "time": 1, "process": 1, "type": "ok"', "not valid JSON"),
        (
            '{"index": 3, "time": 9, "process": 1, "type": "ok", "f": "send", '
            '"value": {"topic": "t", "value": "seven", "partition": 0, "offset": 1}}',
            "value.value",
        ),
    ],
)
def test_malformed_line_exits_3_naming_the_line(spark, tmp_path, capsys, bad, message):
    b = HistoryBuilder()
    b.send(1, 0, 0, 0)
    b.send(1, 1, 0, 1)
    b.send(1, 2, 0, 2)  # lines 1-6
    lines = b.lines()
    lines.insert(3, bad)  # becomes line 4
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["check", str(path)]) == 3
    err = capsys.readouterr().err
    assert "line 4" in err and message in err


@pytest.mark.parametrize(
    "reorder, message",
    [
        (lambda lines: [lines[1], lines[0], *lines[2:]], "line 2: index 0 does not increase"),
        (lambda lines: lines[1:], "do not count up from 0"),  # no line 0: not a whole history
        (lambda lines: [*lines[:3], *lines[4:]], "do not count up from 0"),  # a line missing
    ],
)
def test_misnumbered_history_exits_3(spark, tmp_path, capsys, reorder, message):
    b = HistoryBuilder()
    for v in range(3):
        b.send(1, v, 0, v)
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(reorder(b.lines())) + "\n")
    assert main(["check", str(path)]) == 3
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "bad, message",
    [
        ('{"index": 0, "time": 1, "process": 1, "type": "done", "f": "x", "value": null}', "type"),
        ('{"index": 0, "process": 1, "type": "ok", "f": "send", "value": null}', "'time'"),
        ('{"index": 0, "time": 1, "process": 1, "type": "ok", "f": "send", "value": 3}', "object"),
    ],
)
def test_scan_names_the_problem(tmp_path, bad, message):
    path = tmp_path / "h.jsonl"
    path.write_text(bad + "\n")
    with pytest.raises(HistoryError, match=f"line 1: .*{message}"):
        scan_for_bad_line(path)


def test_scan_names_line_of_wrong_record_type(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text(
        '{"index":0,"time":1,"process":1,"type":"ok","f":"poll","value":{"records":[{"topic":"t"}]}}\n'
    )
    with pytest.raises(HistoryError, match="line 1: poll record"):
        scan_for_bad_line(path)


@pytest.mark.slow
def test_cut_short_last_line_is_skipped(spark, tmp_path, capsys):
    path = _write(tmp_path, "h.jsonl", _drained)
    with open(path, "a") as fh:
        fh.write('{"index": 21, "time": 99999999, "proc')
    assert main(["check", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ops"] == 21


def test_missing_run_dir_history_is_a_harness_error(tmp_path, capsys):
    assert main(["check", str(tmp_path)]) == 3
    assert "no history.jsonl" in capsys.readouterr().err


@pytest.mark.slow
def test_without_elle_a_txn_history_is_never_valid_and_says_why_in_one_line(
    spark, tmp_path, capsys, monkeypatch
):
    """A machine that cannot resolve Elle (here: an empty cache and no `mvn` on
    PATH) still runs every other check, but the cycle checks are unknown, so the
    verdict is unknown, and the reason is one line naming all six checks."""
    from kafka_chaos.checkers.txn.cycle_checks import CYCLE_CHECKS

    from testkit.builder import history_lines
    from testkit.synthetic_txn import generate

    h = generate(seed=11, txns=40)
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text("".join(line + "\n" for line in history_lines(h.ops)))
    (run / "config.json").write_text(json.dumps(h.config))
    monkeypatch.setenv("KAFKA_CHAOS_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["check", str(run)]) == 2
    out = capsys.readouterr().out
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"] == "unknown"
    assert {results["checks"][c]["valid"] for c in CYCLE_CHECKS} == {"unknown"}
    elle_lines = [line for line in out.splitlines() if "Elle" in line]
    assert len(elle_lines) == 1, out
    assert "`mvn` is not installed" in elle_lines[0]
    assert all(c in elle_lines[0] for c in CYCLE_CHECKS), elle_lines[0]
