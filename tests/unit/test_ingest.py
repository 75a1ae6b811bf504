"""history.jsonl -> Parquet rows: the Arrow fast path must equal the Python path exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kafka_chaos.checkers.ingest import convert as ingest
from kafka_chaos.checkers.ingest.topic_ids import STORED
from kafka_chaos.harness.errors import HistoryError

from testkit.builder import HistoryBuilder
from testkit.stored_rows import topic_names, with_topic_names


def _every_kind_of_line(b: HistoryBuilder) -> None:
    b.subscribe(10, "g", ["t"])
    b.rebalance(10, "g", assigned=[("t", 0), ("t", 1)])
    b.assign(11, None, [("t", 1)])
    b.fault("partition", 1, "start", ["n1", "n2"])
    b.send(1, 0, 0, 0)
    b.send(1, 1, 1, 0)
    b.send(2, 2, outcome="fail")
    b.send(2, 3, outcome="info")
    b.invoke_send(3, 4)  # never completed
    b.poll(10, [("t", 0, 0, 0), ("t", 1, 0, 1), ("t", 1, 1, None)])
    b.poll(10, [])
    b.commit(10, "g", [("t", 0, 1), ("t", 1, 2)])
    b.rebalance(10, "g", revoked=[("t", 1)])
    b.fault("partition", 1, "end", ["n1", "n2"])
    b.crash(10, "final drain")
    b.assign(99, None, [("t", 0), ("t", 1)])
    b.poll(99, [("t", 0, 0, 0), ("t", 1, 0, 1)], final=True)


def _history(tmp_path: Path, histories: int = 3) -> Path:
    """Several interleaved histories (``hid``) holding every kind of line."""
    lines = []
    for hid in range(histories):
        b = HistoryBuilder()
        _every_kind_of_line(b)
        lines.append(b.lines(hid))
    path = tmp_path / "h.jsonl"
    # interleave line by line: numbering is per history, not per file
    path.write_text("".join(line + "\n" for group in zip(*lines, strict=True) for line in group))
    return path


def _rows(path: Path, out: Path) -> list[dict]:
    """The stored rows, with topic ids turned back into names (ids depend on chunking)."""
    ingest.convert(path, out)
    table = ingest.read_rows(out)  # plus ``kind``, the partition column
    assert table.schema.names == [*STORED.names, "kind"]
    rows = table.to_pylist()
    names = topic_names(rows)
    assert len(set(names.values())) == len(names)
    rows = with_topic_names(rows)
    # a poll line, its summaries, its records
    order = ("line", "control", "commit", "poll", "record")
    return sorted(
        rows,
        key=lambda r: (r["hid"], r["index"], order.index(r["kind"]), r["j"] or 0, r["partition"]),
    )


def _slow_only(monkeypatch) -> None:
    def refuse(*_):
        raise ingest._SlowPath

    monkeypatch.setattr(ingest, "_fast_rows", refuse)


def test_fast_and_python_paths_make_identical_rows(tmp_path, monkeypatch):
    path = _history(tmp_path)
    fast = _rows(path, tmp_path / "fast.parquet")
    _slow_only(monkeypatch)
    slow = _rows(path, tmp_path / "slow.parquet")
    assert fast == slow
    lines = [r for r in fast if r["kind"] in ("line", "control", "commit")]
    assert len(lines) == 3 * len(path.read_text().splitlines()) // 3
    poll = [r for r in fast if r["hid"] == 1 and r["kind"] == "record" and not r["final"]]
    assert [(r["j"], r["prev_offset"], r["partition"], r["offset"], r["val"]) for r in poll] == [
        (0, None, 0, 0, 0),
        (1, None, 1, 0, 1),
        (2, 0, 1, 1, None),
    ]
    summaries = [r for r in fast if r["hid"] == 1 and r["kind"] == "poll" and not r["final"]]
    assert [
        (r["partition"], r["first_offset"], r["last_offset"], r["straight"]) for r in summaries
    ] == [(0, 0, 0, True), (1, 0, 1, True)]
    fault = next(r for r in fast if r["nemesis"])
    assert (fault["process"], fault["fault_id"], fault["targets"]) == (None, 1, ["n1", "n2"])
    kinds = {(r["f"], r["j"] is None): r["kind"] for r in fast}
    assert kinds[("poll", False)] == "record" and kinds[("send", True)] == "line"
    assert {kinds[(f, True)] for f in ("subscribe", "rebalance", "crash")} == {"control"}
    assert kinds[("commit", True)] == "commit"
    assert kinds[("partition", True)] == "control"  # the fault
    rebalance = next(r for r in fast if r["f"] == "rebalance")
    assert rebalance["assigned"] == [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]


def test_small_chunks_give_the_same_rows(tmp_path, monkeypatch):
    path = _history(tmp_path)
    whole = _rows(path, tmp_path / "whole.parquet")
    monkeypatch.setattr(ingest, "CHUNK_BYTES", 300)  # a few lines per chunk
    assert _rows(path, tmp_path / "small.parquet") == whole


def test_other_json_spellings_take_the_python_path(tmp_path):
    """Spaces after colons hide fault lines from the byte search; Arrow refuses them."""
    path = _history(tmp_path, histories=1)
    compact = _rows(path, tmp_path / "a.parquet")
    spaced = tmp_path / "spaced.jsonl"
    spaced.write_text(
        "".join(json.dumps(json.loads(line)) + "\n" for line in path.read_text().splitlines())
    )
    assert _rows(spaced, tmp_path / "b.parquet") == compact


def test_a_line_that_looks_like_our_marker_is_not_lost(tmp_path):
    b = HistoryBuilder()
    b.send(1, 0, 0, 0)
    lines = b.lines()
    op = json.loads(lines[1])
    op["_blank"] = 1
    lines[1] = json.dumps(op, separators=(",", ":"))
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(lines) + "\n")
    rows = _rows(path, tmp_path / "h.parquet")
    assert [(r["type"], r["offset"]) for r in rows] == [("invoke", None), ("ok", 0)]


def test_cut_short_last_line_is_dropped_but_a_whole_one_is_kept(tmp_path):
    b = HistoryBuilder()
    b.send(1, 0, 0, 0)
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(b.lines()))  # last line complete, newline missing
    assert len(_rows(path, tmp_path / "a.parquet")) == 2
    path.write_text("\n".join(b.lines()) + '\n{"index":2,"ti')
    assert len(_rows(path, tmp_path / "b.parquet")) == 2


@pytest.mark.parametrize("fast", [True, False])
def test_bad_line_is_named_and_no_cache_is_left(tmp_path, monkeypatch, fast):
    if not fast:
        _slow_only(monkeypatch)
    b = HistoryBuilder()
    for v in range(3):
        b.send(1, v, 0, v)
    lines = b.lines()
    lines[5] = lines[5].replace('"offset":2', '"offset":"two"')
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(lines) + "\n")
    bad = "line 6: send ok value.offset must be an integer or null"
    with pytest.raises(HistoryError, match=bad):
        ingest.convert(path, tmp_path / "h.parquet")
    assert list(tmp_path.iterdir()) == [path]


def test_gap_in_numbering_across_chunks_is_found(tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "CHUNK_BYTES", 200)
    b = HistoryBuilder()
    for v in range(20):
        b.send(1, v, 0, v)
    lines = b.lines()
    del lines[25]
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(HistoryError, match="expected 25 next, found 26 at line 26"):
        ingest.convert(path, tmp_path / "h.parquet")


def test_rows_schema_types_match_spark_expectations():
    """Spark reads these columns by name and type; a change needs a FORMAT bump."""
    assert STORED.field("process").type == pa.int64()
    assert STORED.field("j").type == pa.int32()
    assert STORED.field("topic").type == pa.int32()
    assert STORED.field("op").type == pa.int8()
    assert STORED.field("prev_offset").type == pa.int64()
    assert STORED.field("prev_index").type == pa.int64()
    assert STORED.field("straight").type == pa.bool_()
    assert STORED.field("planned_s").type == pa.float64()
    assert STORED.field("at_s").type == pa.float64()
    assert ingest.FORMAT == "rows-18"


def test_op_codes_name_each_send_and_read():
    """One stored integer per send or read row (checkers/ingest/op_codes.py); others have none."""
    from kafka_chaos.checkers.ingest.line_rows import ROWS
    from kafka_chaos.checkers.ingest.op_codes import ACK, FAIL, INFO, INVOKE, READ, op_column

    rows = [
        {"f": "send", "type": "invoke"},
        {"f": "send", "type": "ok"},
        {"f": "send", "type": "fail"},
        {"f": "send", "type": "info"},
        {"f": "poll", "type": "ok"},
        {"f": "poll", "type": "ok", "j": 0},
        {"f": "commit", "type": "ok"},
    ]
    table = pa.Table.from_pylist(rows, ROWS)
    assert op_column(table).to_pylist() == [INVOKE, ACK, FAIL, INFO, None, READ, None]


def test_number_too_big_for_its_column_is_named(tmp_path):
    b = HistoryBuilder()
    b.send(1, 0, 0, 0)
    b.send(1, 1, 2**40, 1)  # partition is a 32-bit integer in Kafka
    path = b.write(tmp_path / "h.jsonl")
    with pytest.raises(HistoryError, match="line 4: "):
        ingest.convert(path, tmp_path / "h.parquet")


def test_topics_are_stored_as_ids_and_named_once(tmp_path):
    b = HistoryBuilder()
    b.subscribe(10, "g", ["zeta", "alpha"])
    b.send(1, 0, 0, 0, topic="zeta")
    b.send(1, 1, 0, 0, topic="alpha")
    b.poll(10, [("zeta", 0, 0, 0)])
    path = b.write(tmp_path / "h.jsonl")
    ingest.convert(path, tmp_path / "h.parquet")
    rows = ingest.read_rows(tmp_path / "h.parquet").to_pylist()
    names = {r["topic"]: r["name"] for r in rows if r["kind"] == "topic"}
    assert names == {0: "alpha", 1: "zeta"}  # a chunk's new names are numbered in order
    subscribe = next(r for r in rows if r["f"] == "subscribe" and r["type"] == "ok")
    assert subscribe["topics"] == [1, 0]
    assert {r["topic"] for r in rows if r["kind"] == "record"} == {1}


def test_each_ack_names_the_previous_ack_of_its_producer_and_partition(tmp_path, monkeypatch):
    """checkers/ingest/ack_order.py, across chunk boundaries and interleaved histories."""
    import random

    rnd = random.Random(7)
    histories = []
    for _ in range(2):
        b = HistoryBuilder()
        for v in range(300):
            outcome = rnd.choice(["ok", "ok", "ok", "fail"])
            b.send(rnd.choice([1, 2, 3]), v, rnd.randrange(3), rnd.randrange(50), outcome)
        histories.append(b)
    lines = [line for group in zip(*(b.lines(h) for h, b in enumerate(histories)), strict=True)
             for line in group]  # fmt: skip
    path = tmp_path / "h.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    monkeypatch.setattr(ingest, "CHUNK_BYTES", 4096)  # dozens of chunks
    ingest.convert(path, tmp_path / "h.parquet")
    got = {
        (r["hid"], r["index"]): (r["prev_offset"], r["prev_index"])
        for r in pq.read_table(tmp_path / "h.parquet" / "kind=line").to_pylist()
    }
    want, acks = {}, 0
    for hid, b in enumerate(histories):
        last: dict[tuple, tuple[int, int]] = {}
        for op in b.ops:
            v = op["value"]
            is_ack = op["type"] == "ok"
            stream = (op["process"], v.get("partition"))
            want[(hid, op["index"])] = last.get(stream, (None, None)) if is_ack else (None, None)
            if is_ack:
                last[stream] = (v["offset"], op["index"])
                acks += 1
    assert got == want
    assert sum(p is not None for p, _ in got.values()) > acks - 20  # nearly all have one


def test_poll_summaries_follow_each_partition_through_interleaved_polls(tmp_path, monkeypatch):
    """checkers/ingest/poll_positions.py against a plain replay: each record's previous offset
    in its poll's reads of the partition, and first, last, straight."""
    import random

    rnd = random.Random(3)
    b = HistoryBuilder()
    for _ in range(200):
        records = []
        for p in range(3):
            start = rnd.randrange(20)
            offsets = list(range(start, start + rnd.randrange(4)))
            if offsets and rnd.random() < 0.3:  # a gap, a step back or a repeat
                offsets.append(rnd.choice([offsets[-1] + 2, offsets[-1] - 1, offsets[-1]]))
            records.append([("t", p, o, o) for o in offsets])
        mixed = []
        while any(records):
            run = rnd.choice([r for r in records if r])
            mixed.append(run.pop(0))
        b.poll(10, mixed)
    path = b.write(tmp_path / "h.jsonl")
    monkeypatch.setattr(ingest, "CHUNK_BYTES", 2048)
    ingest.convert(path, tmp_path / "h.parquet")
    stored = ingest.read_rows(tmp_path / "h.parquet").to_pylist()
    want_prev, want_polls = {}, set()
    for op in b.ops:
        if op["type"] != "ok":
            continue
        by_partition: dict[int, list[int]] = {}
        for j, r in enumerate(op["value"]["records"]):
            offsets = by_partition.setdefault(r["partition"], [])
            want_prev[(op["index"], j)] = offsets[-1] if offsets else None
            offsets.append(r["offset"])
        for p, offs in by_partition.items():
            straight = all(b - a == 1 for a, b in zip(offs, offs[1:], strict=False))
            want_polls.add((op["index"], p, offs[0], offs[-1], straight))
    got_prev = {(r["index"], r["j"]): r["prev_offset"] for r in stored if r["kind"] == "record"}
    got_polls = {
        (r["index"], r["partition"], r["first_offset"], r["last_offset"], r["straight"])
        for r in stored
        if r["kind"] == "poll"
    }
    assert got_prev == want_prev
    assert got_polls == want_polls
    assert {s for *_, s in got_polls} == {True, False}


def test_special_line_search_finds_what_bytes_find_finds():
    """The quicker search for '[[\"' agrees with bytes.find from every start,
    including matches cut off at the end and '[' that start no match."""
    chunk = b'{"a":[1,[2]]}\n{"assigned":[["t",0]]}\n[[[["\n{"x":"[["}\n[["'
    for pattern in ingest._SPECIAL:
        for start in range(len(chunk) + 1):
            assert ingest._find(chunk, pattern, start) == chunk.find(pattern, start)


def test_each_kind_is_written_without_the_columns_it_never_holds(tmp_path):
    """Files lack the always-null columns; readers still see every column, and
    a value in a column its kind should never hold stops the conversion."""
    out = tmp_path / "h.parquet"
    ingest.convert(_history(tmp_path, histories=1), out)
    for kind, names in ingest.WRITTEN.items():
        assert pq.read_schema(out / f"kind={kind}" / "part-0.parquet").names == list(names)
    assert ingest.read_rows(out).schema.names == [*STORED.names, "kind"]
    table = pa.table({"hid": [0], "phase": ["start"]})
    writer = ingest._Writer(tmp_path / "x.parquet", pa.schema([STORED.field("hid")]))
    with pytest.raises(RuntimeError, match="phase"):
        writer.write_table(table)
    writer.close()


def test_an_ack_without_an_offset_stays_on_the_fast_path(tmp_path, monkeypatch):
    """The recorder writes a batch answered DUPLICATE_SEQUENCE_NUMBER as ``ok`` with
    ``offset`` null (workloads/delivery_offsets.py): the Arrow path takes such a chunk
    (a 16 MB chunk sent to the Python path for one such line cost its speed) and makes
    the Python path's rows."""
    b = HistoryBuilder()
    _every_kind_of_line(b)
    b.send(1, 5, 0, None)
    path = b.write(tmp_path / "h.jsonl")

    def refuse(*_):
        raise AssertionError("the Python path was asked")

    with monkeypatch.context() as m:
        m.setattr(ingest, "_slow_rows", refuse)
        fast = _rows(path, tmp_path / "fast.parquet")
    _slow_only(monkeypatch)
    assert fast == _rows(path, tmp_path / "slow.parquet")
    (ack,) = [r for r in fast if r["kind"] == "line" and r["val"] == 5 and r["type"] == "ok"]
    assert (ack["partition"], ack["offset"], ack["prev_offset"]) == (0, None, None)
