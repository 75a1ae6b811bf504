"""The history writer and reader (docs/history.md)."""

import json
import threading

import pytest

from harness.errors import HistoryError
from workloads.history import HistoryWriter, read_history


def test_concurrent_writers_keep_index_and_time_ordered(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as h:

        def work(p):
            for i in range(200):
                h.append(p, "invoke", "send", {"topic": "t", "key": "k", "value": p * 1000 + i})

        threads = [threading.Thread(target=work, args=(p,)) for p in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
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
