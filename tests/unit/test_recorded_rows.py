"""Parquet rows written while recording (checkers/ingest/recorded_rows.py) are the rows
the check's own conversion makes from the JSON, and the JSON stays the truth."""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_chaos.checkers.ingest import convert as ingest
from kafka_chaos.checkers.ingest import load, recorded_rows
from kafka_chaos.checkers.ingest.recorded_rows import RowsRecorder
from kafka_chaos.harness.history import HistoryWriter

from testkit import synthetic, synthetic_txn
from testkit.builder import HistoryBuilder
from testkit.stored_rows import with_topic_names

REPO = Path(__file__).resolve().parents[2]


def canonical(parquet: Path) -> list[bytes]:
    """The rows as a sorted list, topics by name: row order and topic ids depend
    on how the lines were cut into chunks (tests/unit/test_ingest.py), nothing else."""
    kept = with_topic_names(ingest.read_rows(parquet).to_pylist())
    return sorted(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) for r in kept)


def tails(source: Path) -> list[bytes]:
    """Each line of ``source`` without its ``{"index":N,"time":T,`` head, as
    ``HistoryWriter.append_encoded`` takes them."""
    out = []
    for line in source.read_bytes().splitlines(keepends=True):
        op = orjson.loads(line)
        del op["index"], op["time"]
        out.append(orjson.dumps(op, option=orjson.OPT_APPEND_NEWLINE)[1:])
    return out


def record(path: Path, lines: list[bytes], rnd: random.Random, **recorder) -> None:
    """Write ``lines`` through a HistoryWriter with a recorder, in random bursts;
    returns once the rows are written."""
    with HistoryWriter(path, mirror=RowsRecorder(path, **recorder)) as writer:
        at = 0
        while at < len(lines):
            n = rnd.randint(1, 40)
            writer.append_encoded(lines[at : at + n])
            at += n
    recorded_rows.wait_until_written(path.with_suffix(".parquet"))


def converted(history: Path, tmp: Path) -> list[bytes]:
    ingest.convert(history, tmp / "converted.parquet")
    return canonical(tmp / "converted.parquet")


def builder_history(path: Path) -> None:
    """Every kind of line the ingest knows (faults, pair lists, commits, drains)."""
    b = HistoryBuilder()
    b.subscribe(10, "g", ["t"])
    b.rebalance(10, "g", assigned=[("t", 0), ("t", 1)])
    b.fault("partition", 1, "start", ["n1", "n2"])
    b.send(1, 0, 0, 0)
    b.send(1, 1, 1, 0)
    b.send(2, 2, outcome="fail")
    b.invoke_send(3, 4)
    b.poll(10, [("t", 0, 0, 0), ("t", 1, 0, 1), ("t", 1, 1, None)])
    b.commit(10, "g", [("t", 0, 1), ("t", 1, 2)])
    b.fault("partition", 1, "end", ["n1", "n2"])
    b.crash(10, "final drain")
    b.poll(99, [("t", 0, 0, 0), ("t", 1, 0, 1)], final=True)
    path.write_text("".join(line + "\n" for line in b.lines()))


PROPERTY = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(seed=st.integers(0, 2**31), ops=st.integers(50, 4000), batch=st.integers(256, 20000))
def test_recorded_queue_rows_equal_the_converted_ones(tmp_path_factory, seed, ops, batch):
    tmp = tmp_path_factory.mktemp("queue")
    synthetic.generate(ops, tmp / "source.jsonl", seed)
    history = tmp / "history.jsonl"
    record(history, tails(tmp / "source.jsonl"), random.Random(seed), batch_bytes=batch)
    assert ingest.covers(tmp / "history.parquet") == ingest.Covers(
        history.stat().st_size, len(history.read_bytes().splitlines())
    )
    assert canonical(tmp / "history.parquet") == converted(history, tmp)
    assert load.why_stale(history, tmp / "history.parquet") is None


@PROPERTY
@given(txn=synthetic_txn.histories(max_txns=30), batch=st.integers(256, 8000))
def test_recorded_txn_rows_equal_the_converted_ones(tmp_path_factory, txn, batch):
    tmp = tmp_path_factory.mktemp("txn")
    history = tmp / "history.jsonl"
    lines = [
        orjson.dumps({k: v for k, v in op.items() if k not in ("index", "time")})[1:] + b"\n"
        for op in txn.ops
    ]
    record(history, lines, random.Random(txn.seed), batch_bytes=batch)
    assert canonical(tmp / "history.parquet") == converted(history, tmp)


def test_every_kind_of_line_recorded_equals_converted(tmp_path):
    builder_history(tmp_path / "source.jsonl")
    history = tmp_path / "history.jsonl"
    record(history, tails(tmp_path / "source.jsonl"), random.Random(1), batch_bytes=64)
    recorded = canonical(tmp_path / "history.parquet")
    assert len(recorded) > len(history.read_text().splitlines())  # records, summaries too
    assert recorded == converted(history, tmp_path)


def _queue_history(tmp: Path, ops: int = 2000) -> tuple[Path, list[bytes]]:
    synthetic.generate(ops, tmp / "source.jsonl", 7)
    return tmp / "history.jsonl", tails(tmp / "source.jsonl")


def test_missing_unfinished_or_outgrown_rows_are_rebuilt_and_logged(tmp_path, caplog):
    history, lines = _queue_history(tmp_path)
    record(history, lines, random.Random(2))
    parquet = tmp_path / "history.parquet"
    want = canonical(parquet)
    caplog.set_level(logging.INFO, logger="kafka_chaos.checkers.ingest.load")

    assert load.rows_cache(history) == parquet
    assert "building it" not in caplog.text  # recorded, whole: used as it is

    (parquet / "_SUCCESS").unlink()
    load.rows_cache(history)
    assert "history.parquet is unfinished" in caplog.text
    assert canonical(parquet) == want

    import shutil

    shutil.rmtree(parquet)
    load.rows_cache(history)
    assert "history.parquet is missing: building it from history.jsonl" in caplog.text
    assert canonical(parquet) == want

    size = history.stat().st_size
    with HistoryWriter(history) as more:  # the history grew after its rows were made
        more.append(1, "invoke", "send", {"topic": "chaos", "value": 10**6})
    load.rows_cache(history)
    assert f"covers {size} of the history's {history.stat().st_size} bytes" in caplog.text
    assert ingest.covers(parquet).lines == len(lines) + 1


def test_a_line_the_rows_refuse_drops_the_parquet_not_the_line(tmp_path, caplog):
    history, lines = _queue_history(tmp_path, 500)
    caplog.set_level(logging.WARNING, logger="kafka_chaos.checkers.ingest.recorded_rows")
    recorder = RowsRecorder(history, batch_bytes=1)
    with HistoryWriter(history, mirror=recorder) as writer:
        writer.append_encoded(lines[:100])
        writer.append("someone", "invoke", "send", {"topic": "chaos", "value": 1})  # bad process
        writer.append_encoded(lines[100:])
    recorder.wait()
    assert len(history.read_bytes().splitlines()) == len(lines) + 1
    assert not (tmp_path / "history.parquet").exists()
    assert not list(tmp_path.glob(".history.parquet.*"))
    assert "history.parquet is not written while recording" in caplog.text
    assert "process must be an int" in caplog.text


def test_a_writer_left_behind_gives_up_without_blocking(tmp_path, caplog):
    history, lines = _queue_history(tmp_path, 500)
    recorder = RowsRecorder(history, flush_s=60, batch_bytes=1 << 30, max_pending=10_000)
    with HistoryWriter(history, mirror=recorder) as writer:
        for line in lines:
            writer.append_encoded([line])
    recorder.wait()
    assert recorder.failed and "behind" in recorder.failed
    assert len(history.read_bytes().splitlines()) == len(lines)
    assert load.why_stale(history, tmp_path / "history.parquet") == "is missing"


def test_recording_a_whole_file_waits_for_the_rows_instead_of_dropping_them(tmp_path):
    # A file is read far faster than its rows are made: fed without waiting, a
    # 1e7-op history passed max_pending and its Parquet was dropped.
    history, _ = _queue_history(tmp_path)
    (tmp_path / "source.jsonl").rename(history)
    recorded_rows.record_file(history, burst_bytes=4096, max_pending=32 << 10)
    assert load.why_stale(history, tmp_path / "history.parquet") is None


def test_a_history_that_already_held_lines_is_not_mirrored(tmp_path):
    history, lines = _queue_history(tmp_path, 300)
    with HistoryWriter(history) as writer:
        writer.append_encoded(lines[:10])
    recorder = RowsRecorder(history)
    with HistoryWriter(history, mirror=recorder) as writer:
        writer.append_encoded(lines[10:])
    recorder.wait()
    assert recorder.failed == "history.jsonl already held lines"
    assert not (tmp_path / "history.parquet").exists()


KILLED = """
import os, signal, sys
from pathlib import Path
from kafka_chaos.checkers.ingest.recorded_rows import RowsRecorder
from kafka_chaos.harness.history import HistoryWriter
history = Path(sys.argv[1])
lines = open(sys.argv[2], "rb").read().splitlines(keepends=True)
writer = HistoryWriter(history, mirror=RowsRecorder(history, flush_s=0.01, batch_bytes=4096))
for line in lines:
    writer.append_encoded([line])
os.kill(os.getpid(), signal.SIGKILL)  # never closed
"""


def test_a_run_killed_mid_recording_leaves_the_json_whole_and_the_check_right(tmp_path, caplog):
    history, lines = _queue_history(tmp_path, 3000)
    (tmp_path / "tails").write_bytes(b"".join(lines))
    proc = subprocess.run(
        [sys.executable, "-c", KILLED, str(history), str(tmp_path / "tails")],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert len(history.read_bytes().splitlines()) == len(lines)
    assert not (tmp_path / "history.parquet").exists()
    assert list(tmp_path.glob(".history.parquet.*.tmp"))  # the killed run's rows, unfinished
    caplog.set_level(logging.INFO, logger="kafka_chaos.checkers.ingest.load")
    parquet = load.rows_cache(history)
    assert "history.parquet is missing: building it from history.jsonl" in caplog.text
    assert not list(tmp_path.glob(".history.parquet.*.tmp"))  # its owner is gone: removed
    rows = ingest.read_rows(parquet)
    own = [k for k in rows["kind"].to_pylist() if k in ("line", "control", "commit")]
    assert len(own) == len(lines)  # one row for every line the killed run wrote
    assert load.why_stale(history, parquet) is None


def test_the_check_waits_for_rows_still_being_finished(tmp_path, caplog):
    history, lines = _queue_history(tmp_path, 3000)
    recorder = RowsRecorder(history, flush_s=60, batch_bytes=1 << 30)
    with HistoryWriter(history, mirror=recorder) as writer:
        writer.append_encoded(lines)
    caplog.set_level(logging.INFO, logger="kafka_chaos.checkers.ingest.load")
    assert load.rows_cache(history) == tmp_path / "history.parquet"
    assert "building it" not in caplog.text
    assert not recorder._thread.is_alive()


@pytest.mark.slow
def test_check_output_is_the_same_from_recorded_rows_and_from_json(tmp_path, spark):
    from kafka_chaos.checkers.api import analyse

    history, lines = _queue_history(tmp_path, 3000)
    record(history, lines, random.Random(4))
    recorded = analyse(spark, load.read_rows(spark, load.rows_cache(history)), {})
    rebuilt = tmp_path / "rebuilt"
    ingest.convert(history, rebuilt)
    from_json = analyse(spark, load.read_rows(spark, rebuilt), {})
    assert recorded == from_json
    assert recorded[0]["summary"]["acked"] > 1000  # a real verdict, not an empty one


def test_the_command_refuses_a_missing_history_in_one_line(tmp_path, capsys, monkeypatch) -> None:
    """``--help`` or a wrong path was taken for a history: a traceback, and a stray
    ``.NAME.parquet.*.tmp`` directory left where the command ran."""
    from kafka_chaos.checkers.ingest import recorded_rows

    monkeypatch.chdir(tmp_path)
    assert recorded_rows.main(["no-such-history.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no-such-history.jsonl" in err
    assert list(tmp_path.iterdir()) == []
