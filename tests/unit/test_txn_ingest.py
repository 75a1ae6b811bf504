"""Transactional lines -> rows (docs/results.md, "txn rows"): the contract, the same
rows from the Arrow and the Python path, and malformed micro-ops named by line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka_chaos.checkers.ingest import convert as ingest
from kafka_chaos.harness.errors import HistoryError

from testkit.builder import HistoryBuilder, poll_mop, send_mop


def _transactions(b: HistoryBuilder) -> None:
    """Every shape of transaction line the client writes, and a seek."""
    b.subscribe(1, "g", ["t"])
    b.rebalance(1, "g", assigned=[("t", 0), ("t", 1)])
    b.txn(1, [send_mop(1, 0, 0), poll_mop([("t", 0, 0, 1)]), send_mop(2, 1, 0)], group="g")
    b.txn(1, [send_mop(3, 0, 2), poll_mop([("t", 1, 0, 2), ("t", 0, 3, None)])], "fail", "g")
    b.seek(1, "g", [("t", 1, 0), ("t", 0, 3)], reason="rewind after abort")
    b.txn(
        1,
        [poll_mop([("t", 1, 0, 2)]), poll_mop([]), send_mop(4, 0, 4)],
        group="g",
        offsets=[["t", 1, 1]],
    )
    b.txn(
        1,
        [send_mop(5, 1, 2), send_mop(6, skipped=True), poll_mop([], skipped=True)],
        "info",
        "g",
        rebalanced=[["t", 0]],
    )
    b.crash(1, "txn info")
    b.assign(2, "g", [("t", 0)])
    b.txn(2, [poll_mop([("t", 0, 6, 4)])], group="g", offsets=[])  # empty offsets: fast path
    b.txn(2, [poll_mop([], error="_TRANSPORT")], "fail", "g")  # a failed poll still ran
    b.op(2, "invoke", "txn", {"group": "g", "ops": [{"f": "poll"}]})  # ctp: sends follow the poll
    b.op(
        2,
        "ok",
        "txn",
        {
            "group": "g",
            "ops": [
                poll_mop([("t", 0, 7, 9)]),
                send_mop(10, 0, 0, topic="t-out", source=9),
            ],
            "offsets": [["t", 0, 8]],
        },
    )
    b.txn(2, [send_mop(11)], "info", "g")  # invoked, never completed below
    b.ops.pop()  # drop the completion: indeterminate
    # Committed without delivery reports: no offset (partition chosen), neither.
    b.txn(3, [send_mop(12, 1), send_mop(13)], group="g")


def _file(tmp_path: Path, histories: int = 2) -> Path:
    lines = []
    for hid in range(histories):
        b = HistoryBuilder()
        _transactions(b)
        lines.append(b.lines(hid))
    path = tmp_path / "h.jsonl"
    path.write_text("".join(line + "\n" for group in zip(*lines, strict=True) for line in group))
    return path


def _rows(path: Path, out: Path) -> list[dict]:
    ingest.convert(path, out)
    rows = ingest.read_rows(out).to_pylist()
    names = {r["topic"]: r["name"] for r in rows if r["kind"] == "topic"}
    rows = [{**r, "topic": names.get(r["topic"])} for r in rows if r["kind"] != "topic"]
    for r in rows:
        for key in ("offsets", "rebalanced"):
            if r[key] is not None:
                r[key] = [{**item, "topic": names[item["topic"]]} for item in r[key]]
    order = ("commit", "control", "txn", "line", "poll", "record")
    return sorted(
        rows,
        key=lambda r: (
            r["hid"],
            r["index"],
            order.index(r["kind"]),
            r["f"],
            r["mop"] if r["mop"] is not None else -1,
            r["j"] if r["j"] is not None else -1,
            r["partition"] if r["partition"] is not None else -1,
        ),
    )


def _slow_only(monkeypatch) -> None:
    def refuse(*_):
        raise ingest._SlowPath

    monkeypatch.setattr(ingest, "_fast_rows", refuse)


def _brief(r: dict) -> tuple:
    return (r["kind"], r["f"], r["type"], r["index"], r["txn"], r["mop"], r["j"], r["val"])


def test_txn_lines_give_the_contracts_rows(tmp_path):
    rows = [r for r in _rows(_file(tmp_path, 1), tmp_path / "h.parquet") if r["index"] >= 3]
    by_index: dict[int, list[tuple]] = {}
    for r in rows:
        by_index.setdefault(r["index"], []).append(_brief(r))
    # invoke of the first transaction: its own row and one per send (polls give none)
    assert by_index[3] == [
        ("txn", "txn", "invoke", 3, 3, None, None, None),
        ("line", "send", "invoke", 3, 3, 0, None, 1),
        ("line", "send", "invoke", 3, 3, 2, None, 2),
    ]
    # committed: acked sends, one poll row, its record (mop = the poll's position)
    assert by_index[4] == [
        ("txn", "txn", "ok", 4, 3, None, None, None),
        ("line", "poll", "ok", 4, 3, None, None, None),
        ("line", "send", "ok", 4, 3, 0, None, 1),
        ("line", "send", "ok", 4, 3, 2, None, 2),
        ("poll", "poll", "ok", 4, 3, None, None, None),
        ("record", "poll", "ok", 4, 3, 1, 0, 1),
    ]
    aborted = [r for r in rows if r["index"] == 6]
    send = next(r for r in aborted if r["f"] == "send")
    assert (send["type"], send["offset"], send["error"]) == ("fail", 2, "aborted")
    assert [
        (r["j"], r["partition"], r["offset"], r["val"]) for r in aborted if r["j"] is not None
    ] == [
        (0, 1, 0, 2),
        (1, 0, 3, None),
    ]
    seek = next(r for r in rows if r["f"] == "seek")
    assert (seek["kind"], seek["type"], seek["reason"]) == ("control", "ok", "rewind after abort")
    assert seek["offsets"] == [
        {"topic": "t", "partition": 1, "offset": 0},
        {"topic": "t", "partition": 0, "offset": 3},
    ]
    # two polls, one empty: one poll row; records numbered across polls; the commit row
    third = [_brief(r) for r in rows if r["index"] == 9]
    assert third[:2] == [
        ("commit", "commit", "ok", 9, 8, None, None, None),
        ("txn", "txn", "ok", 9, 8, None, None, None),
    ]
    commit = next(r for r in rows if r["index"] == 9 and r["f"] == "commit")
    assert (commit["group"], commit["offsets"]) == (
        "g",
        [{"topic": "t", "partition": 1, "offset": 1}],
    )
    # unknown outcome: its sends indeterminate, a skipped one definitely not written
    unknown = [r for r in rows if r["index"] == 11]
    own = next(r for r in unknown if r["f"] == "txn")
    assert own["rebalanced"] == [{"topic": "t", "partition": 0}]
    assert own["error"] == "commit timed out"
    assert [(r["val"], r["type"], r["offset"]) for r in unknown if r["f"] == "send"] == [
        (5, "info", 2),
        (6, "fail", None),
    ]
    assert not [r for r in unknown if r["f"] == "poll"]  # its only poll was skipped
    empty_offsets = [r for r in rows if r["index"] == 16 and r["f"] == "commit"]
    assert [r["offsets"] for r in empty_offsets] == [[]]
    failed_poll = [_brief(r) for r in rows if r["index"] == 18 and r["f"] == "poll"]
    assert failed_poll == [("line", "poll", "ok", 18, 17, None, None, None)]
    ctp = [r for r in rows if r["index"] == 20 and r["f"] == "send"]
    assert [(r["topic"], r["val"], r["source"], r["mop"], r["txn"]) for r in ctp] == [
        ("t-out", 10, 9, 1, 19)
    ]
    assert [_brief(r) for r in rows if r["index"] == 21] == [
        ("txn", "txn", "invoke", 21, 21, None, None, None),
        ("line", "send", "invoke", 21, 21, 0, None, 11),
    ]
    unreported = [r for r in rows if r["index"] == 23 and r["f"] == "send"]
    assert [(r["type"], r["val"], r["partition"], r["offset"]) for r in unreported] == [
        ("ok", 12, 1, None),
        ("ok", 13, None, None),
    ]


def _membership_and_commits(b: HistoryBuilder) -> None:
    """The other lines with pair lists, and a fault, for the rewrite
    (checkers/ingest/pair_lists.py)."""
    b.subscribe(10, "g", ["t", "u"])
    b.rebalance(10, "g", assigned=[("t", 0), ("u", 1)], revoked=[])
    b.fault("partition", 1, "start", ["n1", "n2"], grudge={"n1": ["n2"]})
    b.poll(10, [("t", 0, 0, 0), ("u", 1, 4, 1)])
    b.commit(10, "g", [("t", 0, 1), ("u", 1, 5)])
    b.op(10, "ok", "commit", {"group": "g", "offsets": []})
    b.rebalance(10, "g", revoked=[("u", 1)])
    b.op(10, "ok", "rebalance", {"group": "g", "assigned": [], "revoked": [], "lost": True})
    b.assign(11, None, [("t", 0), ("t", 1)])
    b.op(11, "ok", "subscribe", {"group": "g", "topics": ["t"], "partitions": [["t", 0]]})
    b.fault("partition", 1, "end", ["n1", "n2"])


def _mixed_file(tmp_path: Path) -> Path:
    b = HistoryBuilder()
    _transactions(b)
    _membership_and_commits(b)
    return b.write(tmp_path / "mixed.jsonl")


@pytest.mark.parametrize("make", [_file, _mixed_file])
def test_fast_and_python_paths_make_identical_txn_rows(tmp_path, monkeypatch, make):
    """The fast path with pair lists in Python, with them rewritten for Arrow, in
    small chunks (completions in other chunks than their invokes), and the
    Python path: the same rows."""
    path = make(tmp_path)
    fast = _rows(path, tmp_path / "fast.parquet")
    monkeypatch.setattr(ingest, "INLINE_PAIR_LINES", 0)
    rewritten = _rows(path, tmp_path / "rewritten.parquet")
    monkeypatch.setattr(ingest, "CHUNK_BYTES", 400)
    small = _rows(path, tmp_path / "small.parquet")
    _slow_only(monkeypatch)
    slow = _rows(path, tmp_path / "slow.parquet")
    assert fast == rewritten == small == slow
    assert any(r["offsets"] for r in fast) and any(r["rebalanced"] for r in fast)


@pytest.mark.parametrize("inline", [300, 0])
def test_the_fast_path_parses_txn_lines_itself(tmp_path, monkeypatch, inline):
    """Only lines with pair lists go through Python (checkers.ingest.line_rows.rows_of),
    and none once a chunk has many of them (rewritten for Arrow)."""
    from kafka_chaos.checkers.ingest import line_rows

    seen = []
    real = line_rows.rows_of

    def counting(op, invoke=None):
        seen.append(op["f"])
        return real(op, invoke)

    monkeypatch.setattr(ingest, "rows_of", counting)
    monkeypatch.setattr(ingest, "INLINE_PAIR_LINES", inline)
    ingest.convert(_file(tmp_path, 1), tmp_path / "h.parquet")
    expected = ["assign", "assign", "rebalance", "seek", "txn", "txn", "txn"]
    assert sorted(seen) == (expected if inline else [])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"group": "g", "ops": [], "offsets": [["t", 0]]}, "offsets must be a list of"),
        ({"group": "g", "ops": [], "rebalanced": [["t", 0, 1]]}, "rebalanced must be a list of"),
        ({"group": "g", "ops": [], "offsets": [["t", 2**40, 1]]}, "too large"),
    ],
)
def test_bad_pair_lists_are_named_when_rewritten(tmp_path, monkeypatch, value, message):
    monkeypatch.setattr(ingest, "INLINE_PAIR_LINES", 0)
    b = HistoryBuilder()
    b.op(2, "invoke", "txn", {"group": "g", "ops": []})
    b.op(2, "ok", "txn", value)
    path = b.write(tmp_path / "h.jsonl")
    with pytest.raises(HistoryError, match=f"line 2: .*({message})"):
        ingest.convert(path, tmp_path / "h.parquet")


def test_a_string_ending_in_a_bracket_is_not_taken_for_a_pair_list(tmp_path, monkeypatch):
    """The rewrite's one false match leaves invalid JSON: the Python path reads the chunk."""
    monkeypatch.setattr(ingest, "INLINE_PAIR_LINES", 0)
    b = HistoryBuilder()
    b.op(2, "invoke", "txn", {"group": "g", "ops": []})
    b.op(2, "fail", "txn", {"group": "g", "ops": [], "error": 'x ["', "reason": '",1]'})
    b.op(3, "ok", "seek", {"group": "g", "offsets": [["t", 0, 1]], "reason": "a [", "x": [1]})
    rows = _rows(b.write(tmp_path / "h.jsonl"), tmp_path / "h.parquet")
    own = next(r for r in rows if r["f"] == "txn" and r["type"] == "fail")
    assert (own["error"], own["reason"]) == ('x ["', '",1]')
    seek = next(r for r in rows if r["f"] == "seek")
    assert seek["reason"] == "a [" and seek["offsets"] == [
        {"topic": "t", "partition": 0, "offset": 1}
    ]


BAD_MOPS = [
    ({"f": "sned", "topic": "t", "value": 1}, "invoke", "micro-op 0: f must be 'send' or 'poll'"),
    ({"f": "send", "topic": "t"}, "invoke", "micro-op 0: send value must be an integer"),
    ({"f": "send", "topic": "t", "value": "1"}, "invoke", "send value must be an integer"),
    ({"f": "send", "value": 1}, "invoke", "micro-op 0: send topic must be a string"),
    ({"f": "send", "topic": "t", "value": 1, "partition": None, "offset": 3}, "ok",
     "micro-op 0: a send's offset needs its partition"),
    ({"f": "send", "topic": "t", "value": 1, "partition": 0, "offset": "3"}, "fail",
     "micro-op 0: send offset must be an integer"),
    ({"f": "send", "topic": "t", "value": 1, "skipped": "yes"}, "fail",
     "micro-op 0: skipped must be a boolean"),
    ({"f": "poll", "records": {"topic": "t"}}, "ok", "micro-op 0: poll records must be a list"),
    ({"f": "poll"}, "ok", "micro-op 0: poll records must be a list"),
    ({"f": "poll", "records": [{"topic": "t", "partition": 0}]}, "ok",
     "micro-op 0: poll record needs topic"),
    ("poll", "ok", "micro-op 0 must be an object"),
]  # fmt: skip


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(("mop", "typ", "message"), BAD_MOPS)
def test_malformed_micro_op_is_named_by_line(tmp_path, monkeypatch, fast, mop, typ, message):
    if not fast:
        _slow_only(monkeypatch)
    b = HistoryBuilder()
    b.send(1, 0, 0, 0)
    b.op(2, "invoke", "txn", {"group": None, "ops": [{"f": "poll"}]})
    b.op(2, typ, "txn", {"group": None, "ops": [mop]})
    path = b.write(tmp_path / "h.jsonl")
    with pytest.raises(HistoryError, match=f"line 4: .*{message}"):
        ingest.convert(path, tmp_path / "h.parquet")
    assert list(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "txn ok needs a value object"),
        ({"group": "g"}, "txn value.ops must be a list of micro-ops"),
        ({"group": "g", "ops": {}}, "txn value.ops must be a list of micro-ops"),
        ({"group": "g", "ops": [], "offsets": [["t", 0]]}, "offsets must be a list of"),
        ({"group": "g", "ops": [], "rebalanced": [[0, 0]]}, "rebalanced must be a list of"),
    ],
)
def test_malformed_txn_value_is_named_by_line(tmp_path, monkeypatch, fast, value, message):
    if not fast:
        _slow_only(monkeypatch)
    b = HistoryBuilder()
    b.op(2, "invoke", "txn", {"group": "g", "ops": []})
    b.op(2, "ok", "txn", value)
    path = b.write(tmp_path / "h.jsonl")
    with pytest.raises(HistoryError, match=f"line 2: {message}"):
        ingest.convert(path, tmp_path / "h.parquet")


@pytest.mark.parametrize("fast", [True, False])
def test_completion_without_invoke_and_second_invoke_are_named(tmp_path, monkeypatch, fast):
    if not fast:
        _slow_only(monkeypatch)
    b = HistoryBuilder()
    b.txn(1, [send_mop(1, 0, 0)])
    b.op(1, "fail", "txn", {"group": None, "ops": [], "error": "x"})
    path = b.write(tmp_path / "h.jsonl")
    with pytest.raises(HistoryError, match="line 3: txn fail of process 1 without an invoke"):
        ingest.convert(path, tmp_path / "h.parquet")
    b = HistoryBuilder()
    b.op(1, "invoke", "txn", {"group": None, "ops": []})
    b.op(1, "invoke", "txn", {"group": None, "ops": []})
    path = b.write(tmp_path / "h2.jsonl")
    with pytest.raises(HistoryError, match="line 2: txn invoke while process 1's transaction"):
        ingest.convert(path, tmp_path / "h2.parquet")


def test_a_seek_without_value_is_refused(tmp_path):
    b = HistoryBuilder()
    b.op(1, "ok", "seek", None)
    path = b.write(tmp_path / "h.jsonl")
    with pytest.raises(HistoryError, match="line 1: seek ok needs a value object"):
        ingest.convert(path, tmp_path / "h.parquet")


def test_spaced_txn_lines_take_the_python_path(tmp_path):
    path = _file(tmp_path, 1)
    compact = _rows(path, tmp_path / "a.parquet")
    spaced = tmp_path / "spaced.jsonl"
    spaced.write_text(
        "".join(json.dumps(json.loads(line)) + "\n" for line in path.read_text().splitlines())
    )
    assert _rows(spaced, tmp_path / "b.parquet") == compact
