"""The history writer and reader (docs/history.md)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _threads import run_in_threads
from kafka_chaos.harness.errors import HistoryError
from kafka_chaos.harness.history import HistoryWriter, encode_tail, read_history


def test_concurrent_writers_keep_index_and_time_ordered(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as h:

        def work(p):
            for i in range(200):
                h.append(p, "invoke", "send", {"topic": "t", "key": "k", "value": p * 1000 + i})

        run_in_threads(work, 4)
    ops = list(read_history(path))
    assert [op["index"] for op in ops] == list(range(800))
    times = [op["time"] for op in ops]
    assert times == sorted(times)


def test_each_line_is_on_disk_before_close(tmp_path):
    path = tmp_path / "history.jsonl"
    h = HistoryWriter(path)
    h.append("nemesis", "info", "kill", {"phase": "start", "id": 0, "targets": ["n1"]})
    # Another reader sees the line although the writer is still open.
    assert json.loads(path.read_text())["f"] == "kill"
    h.close()


def test_appending_continues_numbering(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as h:
        h.append(0, "invoke", "poll", None)
    with HistoryWriter(path) as h:
        assert h.append(0, "ok", "poll", {"records": []})["index"] == 1


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "line 2: not valid JSON"),
        ('{"index": 1, "time": 5, "process": 0, "type": "ok"}', "line 2: missing field 'f'"),
        ('{"index": 1, "time": "5", "process": 0, "type": "ok", "f": "x"}', "field 'time'"),
        ('{"index": 1, "time": 5, "process": 0, "type": "done", "f": "x"}', "unknown type"),
        ('{"index": 0, "time": 5, "process": 0, "type": "ok", "f": "x"}', "does not increase"),
        ('{"index": 1, "time": 5, "process": "n1", "type": "ok", "f": "x"}', "'nemesis'"),
    ],
)
def test_malformed_lines_are_named(tmp_path, line, message):
    path = tmp_path / "history.jsonl"
    first = '{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "poll", "value": null}'
    path.write_text(first + "\n" + line + "\n")
    with pytest.raises(HistoryError, match=message):
        list(read_history(path))


def test_a_line_cut_short_by_a_crash_leaves_the_prefix(tmp_path):
    path = tmp_path / "history.jsonl"
    first = '{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "poll", "value": null}'
    path.write_text(first + "\n" + '{"index": 1, "ti')
    assert [op["index"] for op in read_history(path)] == [0]


def test_a_batch_gets_consecutive_indices_and_one_time(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as h:
        h.append("nemesis", "info", "kill", {"phase": "start", "id": 0, "targets": ["n1"]})
        tails = [encode_tail(3, "invoke", "send", {"value": v}) for v in range(5)]
        first, stamp = h.append_encoded(tails)
        assert h.append_encoded([])[0] == 6  # nothing written, nothing numbered
        h.append(3, "ok", "send", {"value": 0, "partition": 0, "offset": 0})
    ops = list(read_history(path))
    assert first == 1
    assert [op["index"] for op in ops] == list(range(7))
    assert [op["time"] for op in ops[1:6]] == [stamp] * 5
    times = [op["time"] for op in ops]
    assert times == sorted(times)
    assert [op["value"]["value"] for op in ops[1:6]] == list(range(5))


def test_append_returns_what_it_wrote(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as h:
        op = h.append(0, "invoke", "poll", {"final": True})
    assert list(read_history(path)) == [op]


def test_concurrent_batches_never_interleave(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as h:

        def work(p):
            for i in range(50):
                h.append_encoded([encode_tail(p, "info", "x", {"i": i, "j": j}) for j in range(20)])

        run_in_threads(work, 4)
    ops = list(read_history(path))
    assert [op["index"] for op in ops] == list(range(4000))
    for k in range(0, 4000, 20):  # each batch is contiguous in the file
        batch = ops[k : k + 20]
        assert {op["process"] for op in batch} == {batch[0]["process"]}
        assert [op["value"]["j"] for op in batch] == list(range(20))


def test_a_batch_cut_short_by_sigkill_leaves_a_valid_prefix(tmp_path):
    """A real SIGKILL while a process writes batches: the file is a valid prefix."""
    path = tmp_path / "history.jsonl"
    script = textwrap.dedent(
        """
        import sys
        from kafka_chaos.harness.history import HistoryWriter, encode_tail
        h, v = HistoryWriter(sys.argv[1]), 0
        while True:
            pad = "x" * 300
            h.append_encoded([encode_tail(0, "invoke", "send", {"value": v + j, "pad": pad})
                              for j in range(200)])
            h.append_encoded([encode_tail(0, "ok", "send", {"value": v + j})
                              for j in range(200)])
            v += 200
        """
    )
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", script, str(path)], cwd=repo)
    try:
        deadline = time.monotonic() + 30
        while (
            not path.exists() or path.stat().st_size < 2_000_000
        ) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    ops = list(read_history(path))  # raises on anything but a cut-short last line
    assert len(ops) > 1000
    assert [op["index"] for op in ops] == list(range(len(ops)))
    invoked: set[int] = set()
    for op in ops:
        if op["type"] == "invoke":
            invoked.add(op["value"]["value"])
        else:
            assert op["value"]["value"] in invoked


def test_a_line_cut_inside_a_batch_is_skipped(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as h:
        h.append_encoded([encode_tail(0, "invoke", "send", {"value": v}) for v in range(3)])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 7])  # the write stopped inside the third line
    assert [op["index"] for op in read_history(path)] == [0, 1]


def test_broker_wall_clock_times_land_on_the_history_axis(monkeypatch):
    import time

    from kafka_chaos.harness.history import wall_clock_on_history_axis

    assert wall_clock_on_history_axis(None) is None
    monkeypatch.setattr(time, "time", lambda: 1_000.0)  # wall clock: 1,000,000 ms
    on_axis = wall_clock_on_history_axis(lambda: 12_500_000_000)  # history: 12.5 s
    assert on_axis(1_000_000) == 12.5
    assert on_axis(998_000) == 10.5  # two seconds before the anchor
