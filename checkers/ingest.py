"""history.jsonl -> the Parquet *rows* table every checker reads.

A row is one history line (``j`` null), and each record a poll returned is one
more row (``j`` = its position in the poll) carrying its poll line's fields.
Sends and records share ``topic, partition, offset, val``, so "every
observation of a value at an offset" is one filter, not a union.  The schema
is ``checkers.line_rows.ROWS``.

Why not Spark's JSON reader: parsing, exploding and writing a 1e7-line
history took it 55 s on two cores, a third of the whole check.  Arrow's JSON
reader is C++ and multi-threaded, so the history is streamed through it in
chunks (bounded memory, never the whole file at once) and written as
Parquet, which Spark then reads column by column.

Arrow needs one type per field, and a few lines break that: membership and
commit lines hold ``[topic, partition]`` pairs (mixed types) and fault lines
have ``process: "nemesis"`` and free-form parameters.  They are rare, so they
are found by a byte search, parsed in Python (``checkers.line_rows``) and
blanked out of the chunk before Arrow sees it.  Anything else Arrow cannot
read, or any row that fails the vectorised checks, sends its chunk down the
slow path: every line through the Python validation, which names the first
bad line.

An optional top-level ``hid`` field tags lines of different histories in one
file (the tests judge hundreds of histories in one Spark job); each history
numbers its lines from 0.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from checkers.line_rows import ROWS, checked, rows_of
from harness.errors import HistoryError
from workloads.history import NEMESIS, TYPES

FORMAT = "rows-4"  # bump when the rows table changes shape: older caches are rebuilt
FORMAT_FILE = "_KAFKA_CHAOS_FORMAT"
CHUNK_BYTES = 32 << 20

_RECORD = pa.struct(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("value", pa.int64()),
    ]
)
# What Arrow reads of a send or poll line; every other field is ignored.
_HOT = pa.schema(
    [
        ("hid", pa.int32()),
        ("index", pa.int64()),
        ("time", pa.int64()),
        ("process", pa.int64()),
        ("type", pa.string()),
        ("f", pa.string()),
        (
            "value",
            pa.struct(
                [
                    ("topic", pa.string()),
                    ("value", pa.int64()),
                    ("partition", pa.int32()),
                    ("offset", pa.int64()),
                    ("error", pa.string()),
                    ("final", pa.bool_()),
                    ("records", pa.list_(_RECORD)),
                ]
            ),
        ),
        ("_blank", pa.int8()),  # a line handled in Python (see _blank_out)
    ]
)
_HOT_OPTIONS = pj.ParseOptions(explicit_schema=_HOT, unexpected_field_behavior="ignore")
_BLANK = b'{"_blank":1}'
# Every line Arrow must not see contains one of these (compact JSON, as the
# recorder writes it; other spellings fail in Arrow and take the slow path).
_SPECIAL = tuple(
    f'"{key}":"{name}"'.encode()
    for key, name in [
        ("process", NEMESIS),
        *(("f", f) for f in ("subscribe", "assign", "rebalance", "commit", "crash")),
    ]
)


class _SlowPath(Exception):
    """The fast path cannot vouch for a chunk; the Python path will judge it."""


def convert(history: Path, parquet: Path) -> None:
    """Write the rows of ``history`` to the Parquet directory ``parquet``.

    Raises HistoryError naming the first bad line.  The directory appears
    whole or not at all: it is written beside its place, then renamed.
    """
    history, parquet = Path(history), Path(parquet)
    if not history.is_file():
        raise HistoryError(f"{history}: no such history file")
    tmp = parquet.with_name(f".{parquet.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with pq.ParquetWriter(tmp / "rows.parquet", ROWS, compression="snappy") as writer:
            for table in _tables(history):
                writer.write_table(table)
        (tmp / FORMAT_FILE).write_text(FORMAT + "\n")
        (tmp / "_SUCCESS").touch()
        shutil.rmtree(parquet, ignore_errors=True)
        tmp.rename(parquet)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def is_current(parquet: Path) -> bool:
    """Whether ``parquet`` holds rows in this version's shape (see FORMAT)."""
    mark = Path(parquet) / FORMAT_FILE
    return mark.exists() and mark.read_text().strip() == FORMAT


def scan_for_bad_line(history: Path) -> None:
    """Validate ``history`` line by line in Python; raise HistoryError at the first problem."""
    numbering = _Numbering(Path(history))
    for lineno, chunk in _chunks(Path(history)):
        _slow_rows(chunk, lineno, numbering)
    numbering.finish()


def _tables(history: Path) -> Iterator[pa.Table]:
    numbering = _Numbering(history)
    for lineno, chunk in _chunks(history):
        try:
            yield _fast_rows(chunk, numbering)
        except (_SlowPath, pa.ArrowInvalid):
            yield _slow_rows(chunk, lineno, numbering)
    numbering.finish()


def _chunks(history: Path) -> Iterator[tuple[int, bytes]]:
    """(number of the chunk's first line, whole lines), about CHUNK_BYTES each.

    A final line without its newline is a write cut short by a crash: it is
    dropped if it does not parse (the prefix before it is still valid), as
    ``workloads.history.read_history`` does.
    """
    lineno, rest = 1, b""
    with open(history, "rb") as fh:
        while block := fh.read(CHUNK_BYTES):
            data = rest + block
            cut = data.rfind(b"\n") + 1
            if cut:
                yield lineno, data[:cut]
                lineno += data.count(b"\n", 0, cut)
            rest = data[cut:]
    if rest.strip():
        try:
            orjson.loads(rest)
        except orjson.JSONDecodeError:
            return
        yield lineno, rest + b"\n"


class _Numbering:
    """Each history (``hid``) numbers its lines 0, 1, 2, ... in file order.

    An index that does not increase is reported at once.  A gap is reported
    only at the end, so that a line out of order anywhere in the file is
    named first: it explains the gap.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.next: dict[int, int] = {}
        self.gap: str | None = None

    def check_line(self, hid: int, index: int, lineno: int) -> None:
        expected = self.next.get(hid, 0)
        if index < expected:
            raise HistoryError(
                f"{self.path}: line {lineno}: index {index} does not increase "
                f"(previous {expected - 1})"
            )
        if index > expected and self.gap is None:
            self.gap = f"history {hid}: expected {expected} next, found {index} at line {lineno}"
        self.next[hid] = index + 1

    def check_chunk(self, hid: pa.Array, index: pa.Array) -> bool:
        """Whether ``index`` continues every history's numbering exactly; advances it if so."""
        order = pc.sort_indices(hid)  # stable: file order within each history
        h, i = hid.take(order), index.take(order)
        new_history = pc.not_equal(pc.pairwise_diff(h), 0).fill_null(True)
        if not pc.all(pc.or_(new_history, pc.equal(pc.pairwise_diff(i), 1))).as_py():
            return False
        starts = pc.indices_nonzero(new_history).to_pylist()
        ends = [s - 1 for s in starts[1:]] + [len(h) - 1]
        if any(i[s].as_py() != self.next.get(h[s].as_py(), 0) for s in starts):
            return False
        self.next.update(
            {h[s].as_py(): i[e].as_py() + 1 for s, e in zip(starts, ends, strict=True)}
        )
        return True

    def finish(self) -> None:
        if self.gap:
            raise HistoryError(
                f"{self.path}: operation indices do not count up from 0 by one ({self.gap})"
            )


# --- slow path: every line in Python ----------------------------------------------------


def _slow_rows(chunk: bytes, lineno: int, numbering: _Numbering) -> pa.Table:
    ops = []
    for n, raw in enumerate(chunk.split(b"\n")[:-1], start=lineno):
        if not raw.strip():
            continue
        try:
            op = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise HistoryError(f"{numbering.path}: line {n}: not valid JSON ({e})") from e
        checked(op, n, numbering.path)
        numbering.check_line(op.get("hid") or 0, op["index"], n)
        ops.append((n, op))
    try:
        return pa.Table.from_pylist([r for _, op in ops for r in rows_of(op)], ROWS)
    except (pa.ArrowInvalid, OverflowError):
        for n, op in ops:  # name the line whose number does not fit its column
            try:
                pa.Table.from_pylist(rows_of(op), ROWS)
            except (pa.ArrowInvalid, OverflowError) as e:
                raise HistoryError(f"{numbering.path}: line {n}: {e}") from e
        raise


# --- fast path: Arrow, with the few untyped lines in Python -----------------------------


def _fast_rows(chunk: bytes, numbering: _Numbering) -> pa.Table:
    blanked, special = _blank_out(chunk)
    lines = pj.read_json(pa.py_buffer(blanked), parse_options=_HOT_OPTIONS).combine_chunks()
    is_blank = pc.is_valid(_column(lines, "_blank"))
    if (pc.sum(is_blank.cast(pa.int64())).as_py() or 0) != len(special):
        raise _SlowPath  # a marker that is not ours, or a line Arrow skipped
    hid = _column(lines, "hid").fill_null(0)
    index = _column(lines, "index")
    if special:
        hid = pc.replace_with_mask(
            hid, is_blank, pa.array([s.get("hid") or 0 for s in special], pa.int32())
        )
        index = pc.replace_with_mask(
            index, is_blank, pa.array([s["index"] for s in special], pa.int64())
        )
    if index.null_count or not numbering.check_chunk(hid, index):
        raise _SlowPath
    hot = lines.filter(pc.invert(is_blank)) if special else lines
    tables = list(_hot_rows(hot))
    if special:
        tables.append(pa.Table.from_pylist([r for op in special for r in rows_of(op)], ROWS))
    return pa.concat_tables(tables)


def _blank_out(chunk: bytes) -> tuple[bytes, list[dict]]:
    """The chunk with each special line replaced by a marker, and those lines parsed.

    The marker (padded with spaces to the line's length) keeps the line's
    place, so Arrow returns one row for it and the index column can be
    completed in file order from the parsed lines.
    """
    spans = set()
    for pattern in _SPECIAL:
        at = chunk.find(pattern)
        while at >= 0:
            end = chunk.find(b"\n", at)
            spans.add((chunk.rfind(b"\n", 0, at) + 1, end))
            at = chunk.find(pattern, end)
    if not spans:
        return chunk, []
    buf = bytearray(chunk)
    special = []
    for start, end in sorted(spans):
        if end - start < len(_BLANK):
            raise _SlowPath
        try:
            special.append(checked(orjson.loads(chunk[start:end]), 0, Path("-")))
        except (orjson.JSONDecodeError, HistoryError) as e:
            raise _SlowPath from e
        buf[start:end] = _BLANK.ljust(end - start)
    return bytes(buf), special


def _column(table: pa.Table, name: str) -> pa.Array:
    """One column of a combined table as a single array (also for an empty table)."""
    col = table[name]
    return (
        col.chunk(0)
        if col.num_chunks == 1
        else pa.concat_arrays(col.chunks)
        if col.num_chunks
        else pa.array([], col.type)
    )


def _all(mask: pa.Array) -> bool:
    return len(mask) == 0 or bool(pc.all(mask.fill_null(False)).as_py())


def _hot_rows(hot: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(line rows, record rows) of send and poll lines; _SlowPath if any looks wrong.

    The checks mirror ``checkers.line_rows.check_value``: whatever they let
    through, the Python path would accept too.
    """
    n = len(hot)
    col = {name: _column(hot, name) for name in ("hid", "index", "time", "process", "type", "f")}
    value = _column(hot, "value")
    v = {name: pc.struct_field(value, name) for name in _HOT.field("value").type.names}
    f, typ = col["f"], col["type"]
    send, poll_ok = pc.equal(f, "send"), pc.and_(pc.equal(f, "poll"), pc.equal(typ, "ok"))
    send_ok = pc.and_(send, pc.equal(typ, "ok"))
    valid = pc.is_valid
    ok = [
        valid(col["time"]),
        valid(col["process"]),
        pc.is_in(typ, pa.array(TYPES)),
        pc.is_in(f, pa.array(["send", "poll"])),  # anything else must be a special line
        pc.or_(pc.invert(send), pc.and_(valid(v["topic"]), valid(v["value"]))),
        pc.or_(pc.invert(send_ok), pc.and_(valid(v["partition"]), valid(v["offset"]))),
        pc.or_(pc.invert(poll_ok), valid(v["records"])),
    ]
    if not all(_all(m) for m in ok):
        raise _SlowPath
    nulls = {name: pa.nulls(n, ROWS.field(name).type) for name in ROWS.names}
    line = {
        **nulls,
        **col,
        "hid": col["hid"].fill_null(0),
        "nemesis": pa.repeat(False, n),
        "topic": v["topic"],
        "val": v["value"],
        "partition": v["partition"],
        "offset": v["offset"],
        "error": v["error"],
        "final": v["final"].fill_null(False),
    }
    lines = pa.Table.from_arrays([line[name] for name in ROWS.names], schema=ROWS)
    return lines, _record_rows(
        lines, pc.if_else(poll_ok, v["records"], pa.scalar(None, v["records"].type))
    )


def _record_rows(lines: pa.Table, records: pa.Array) -> pa.Table:
    """One row per polled record, carrying its poll line's fields."""
    parent = pc.list_parent_indices(records)
    flat = pc.list_flatten(records)
    r = {name: pc.struct_field(flat, name) for name in ("topic", "partition", "offset")}
    if not _all(
        pc.and_(
            pc.and_(pc.is_valid(r["topic"]), pc.is_valid(r["partition"])), pc.is_valid(r["offset"])
        )
    ):
        raise _SlowPath
    length = pc.list_value_length(records).fill_null(0)
    first = pc.subtract(pc.cumulative_sum(length), length)  # position of each poll's first record
    position = pc.subtract(pc.cumulative_sum(pa.nulls(len(flat), pa.int64()).fill_null(1)), 1)
    rows = lines.take(parent)
    columns = {name: rows[name] for name in ROWS.names}
    columns.update(
        j=pc.subtract(position, first.take(parent)).cast(pa.int32()),
        topic=r["topic"],
        partition=r["partition"],
        offset=r["offset"],
        val=pc.struct_field(flat, "value"),
    )
    return pa.Table.from_arrays([columns[name] for name in ROWS.names], schema=ROWS)
