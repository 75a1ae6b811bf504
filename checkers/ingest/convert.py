"""history.jsonl -> the Parquet *rows* table every checker reads.

A row is one history line (``j`` null), and each record a poll returned is one
more row (``j`` = its position in the poll) carrying its poll line's fields.
Sends and records share ``topic, partition, offset, val``, so "every
observation of a value at an offset" is one filter, not a union.  Lines are
parsed into ``checkers.ingest.line_rows.ROWS`` and stored as
``checkers.ingest.topic_ids.STORED``, with topics as small integers and each send
or read row's kind as the integer ``op`` (``checkers.ingest.op_codes``), and each
ack with the previous ack of its producer and partition
(``checkers.ingest.ack_order``), and each polled record with its position among
its poll's records of the same partition, and each poll's records of one
partition summarised in a ``kind=poll`` row (``checkers.ingest.poll_positions``).
Rows are
stored in Parquet partitions, ``kind=line`` (sends, polls), ``kind=record``
(polled records), ``kind=poll`` (their summaries), ``kind=control``
(membership, crashes, faults), ``kind=commit`` (offset commits),
``kind=txn`` (a transaction line's own row) and ``kind=topic`` (the topic
names), so that Spark reads only the
files a check needs: the control lines are a tiny part of a history but are
read by many checks.

Why not Spark's JSON reader: parsing, exploding and writing a 1e7-line
history took it 55 s on two cores, a third of the whole check.  Arrow's JSON
reader is C++ and multi-threaded, so the history is streamed through it in
chunks (bounded memory, never the whole file at once), two chunks at a time.

Transactional histories are mostly ``txn`` lines, each holding a list of
micro-ops; Arrow reads those too and ``checkers.ingest.txn_rows`` expands them into
the rows of their sends, polls and records, with list kernels, and pairs each
completion with its invoke across chunks, in file order.

Arrow needs one type per field, and two kinds of line break that:
``[topic, partition]`` pairs (mixed-type arrays, in membership and commit
lines, and a transaction's ``offsets`` and ``rebalanced``) and fault lines
(``process: "nemesis"``, free-form parameters).  They are found by a byte
search, parsed in Python
(``checkers.ingest.line_rows``) and blanked out of the chunk before Arrow sees it.
Anything else Arrow cannot read, or any row that fails the vectorised checks,
sends its chunk down the slow path: every line through the Python
validation, which names the first bad line.

An optional top-level ``hid`` field tags lines of different histories in one
file (the tests judge hundreds of histories in one Spark job); each history
numbers its lines from 0.
"""

from __future__ import annotations

import importlib
import os
import shutil
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq
from kafka_chaos.checkers.ingest import pair_lists, poll_positions
from kafka_chaos.checkers.ingest.ack_order import COLUMNS as ACK_ORDER
from kafka_chaos.checkers.ingest.ack_order import AckOrder
from kafka_chaos.checkers.ingest.line_rows import (
    APART,
    COLUMNS,
    DECLARED,
    DRAIN_BOUNDS,
    KINDS,
    ROWS,
    STORED_APART,
    check_declared,
    checked,
    kind_of,
    rows_of,
)
from kafka_chaos.checkers.ingest.null_columns import nulls
from kafka_chaos.checkers.ingest.poll_positions import PREVIOUS, SUMMARY, link_and_summarise
from kafka_chaos.checkers.ingest.sorted_runs import row_numbers
from kafka_chaos.checkers.ingest.topic_ids import STORED, TopicIds
from kafka_chaos.checkers.ingest.txn_rows import RECORD, SlowPath, TxnPairing
from kafka_chaos.harness.errors import HistoryError
from kafka_chaos.harness.history import NEMESIS, TYPES
from kafka_chaos.workloads import registry as workloads

FORMAT = "rows-18"  # bump when the rows table changes shape: older caches are rebuilt
FORMAT_FILE = "_KAFKA_CHAOS_FORMAT"
COVERS_FILE = "_KAFKA_CHAOS_COVERS"  # see Covers
# 16 MB, not 32: glibc serves an allocation over 32 MB by a fresh mmap, so each
# copy of a bigger chunk (read, blanked, rewritten) was faulted in page by page
# and returned on free: 3.4e6 page faults and 12.4 of the 1e7-op conversion's
# 37.0 CPU-seconds in the kernel, against 0.5e6 and 3.9 of 29.7 at 16 MB.
CHUNK_BYTES = 16 << 20
IN_FLIGHT = 3  # chunks parsed ahead of the writer: bounds memory
# Columns that differ on nearly every row: a Parquet dictionary of them only
# costs time (Arrow tries one, then gives up).  Writing them plain took the
# 1e7-op conversion from 16.0 s to 14.4 s and the files from 257 to 212 MB.
_UNIQUE_PER_ROW = ("index", "time", "val", "offset", "prev_offset", "prev_index")

# The columns each big kind of row can hold; the others are null in every row
# of that kind, and writing them cost a third of the writer's time (1e7 ops:
# 5.6 CPU-seconds in all).  Readers take the full STORED schema
# (``read_rows``), which fills a column a file lacks with nulls.  A workload's
# own line kind says which kinds of row hold its columns (``_declared_on``)
# and which columns the kinds it stores apart hold (``STORED_APART``).


def _declared_on(kind: str) -> tuple[str, ...]:
    return tuple(c.name for c in COLUMNS if kind in c.on)


_LINE_AND_RECORD = (
    "hid", "index", "time", "process", "nemesis", "type", "f", "topic", "val",
    "partition", "offset", "error", "final", "group", "topics", "reason", "op",
)  # fmt: skip
WRITTEN = {
    "line": (*_LINE_AND_RECORD, *_declared_on("line"), *(name for name, _ in ACK_ORDER)),
    "record": (*_LINE_AND_RECORD, *_declared_on("record"), "j", PREVIOUS),
    "poll": (*poll_positions.KEPT, *(name for name, _ in SUMMARY)),
    **STORED_APART,
}  # fmt: skip
WRITTEN["commit"] = (
    "hid", "index", "time", "process", "nemesis", "type", "f", "error", "reason", "final",
    "group", "offsets", *_declared_on("commit"),
)  # fmt: skip
# Control rows never hold a record's or an ack's bookkeeping (``Tables.control``
# caches just these: at 1e7 transactional ops, when commits were control rows
# too, 2.7e6 rows cached in 10 s instead of 12-20 s with every column).
WRITTEN["control"] = (
    "hid", "index", "time", "process", "nemesis", "type", "f", "topic", "val",
    "partition", "offset", "error", "final", "group", "topics", "partitions",
    "assigned", "revoked", "offsets", "phase", "fault_id", "targets", "planned_s",
    "at_s", "reason", *_declared_on("control"), *DRAIN_BOUNDS,
)  # fmt: skip
# What readers see: every column of every kind, and the partition column.
ROWS_TABLE = STORED.append(pa.field("kind", pa.string()))

# The Arrow fast paths of the workloads' own line kinds, by ``f`` (the module a
# declaration's ``arrow`` names, e.g. checkers/ingest/txn_rows.py): ``VALUE``,
# what Arrow reads of the line's value beyond the contract's fields;
# ``valid(is_line, v)``, masks that must hold; ``own_columns(is_line, type,
# index)``, columns of the lines' own rows; ``rows(lines, v, is_line)``, the rows
# they give beyond their own.  Lines of a kind without one are parsed in Python.
_FAST = {kind.f: importlib.import_module(kind.arrow) for kind in DECLARED if kind.arrow}
# What Arrow reads of a line; every other field is ignored.
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
                    ("records", pa.list_(RECORD)),
                    *(field for fast in _FAST.values() for field in fast.VALUE),
                    ("group", pa.string()),
                    ("topics", pa.list_(pa.string())),
                    ("reason", pa.string()),
                    *((name, pa.int64()) for name in DRAIN_BOUNDS),
                    *((name, pair_lists.TYPE) for name in pair_lists.NAMES),
                ]
            ),
        ),
        ("_blank", pa.int8()),  # a line handled in Python (see _blank_out)
    ]
)
_HOT_OPTIONS = pj.ParseOptions(explicit_schema=_HOT, unexpected_field_behavior="ignore")
# Chunks are already parsed two at a time, so Arrow's own thread pool only
# adds hand-offs: without it the 1e7-op conversion took 13.5/13.3 s instead
# of 14.7/13.9 s.
_ONE_THREAD = pj.ReadOptions(use_threads=False)
_BLANK = b'{"_blank":1}'
# Every line Arrow must not see contains one of these in compact JSON, as the
# recorder writes it.  Other spellings fail in Arrow and take the slow path.
_NEMESIS_LINE, _PAIRS = f'"process":"{NEMESIS}"'.encode(), b'[["'
_SPECIAL = (_NEMESIS_LINE, _PAIRS)


def _declared_lines() -> tuple[bytes, ...]:
    """The lines of the kinds workloads declare (workloads/registry.py) with no
    fast path of their own: their rows are the declaration's to make
    (``line_rows.rows_of``), never Arrow's."""
    return tuple(f'"f":"{k.f}"'.encode() for k in workloads.line_kinds() if k.f not in _FAST)


# A chunk with more lines holding pair lists than this has them rewritten for
# Arrow (checkers/ingest/pair_lists.py) rather than parsed in Python: RE2 over the
# chunk costs about what Python spends on a few hundred such lines.
INLINE_PAIR_LINES = 300


_SlowPath = SlowPath  # the fast path cannot vouch for a chunk; the Python path will judge it


def convert(history: Path, parquet: Path) -> None:
    """Write the rows of ``history`` to the Parquet directory ``parquet``.

    Raises HistoryError naming the first bad line.  The directory appears
    whole or not at all: it is written beside its place, then renamed.
    """
    history, parquet = Path(history), Path(parquet)
    check_declared()
    if not history.is_file():
        raise HistoryError(f"{history}: no such history file")
    out = RowsDir(parquet, parquet.with_name(f".{parquet.name}.{os.getpid()}.tmp"))
    try:
        source = _Source(history)
        for tables in _tables(source):
            out.write(tables)
        out.finish(source.covers)
    finally:
        out.abort()  # nothing left to remove once finished


@dataclass(frozen=True)
class Covers:
    """How much of its history a rows directory holds: the bytes and lines of
    the JSON it was made from.  A history is append-only, so rows that cover
    as many bytes as the history has (and were finished after its last write)
    are its rows; fewer is a history that grew, or rows cut short."""

    bytes: int
    lines: int


class RowsDir:
    """A rows directory being written in ``tmp``, chunk by chunk, and renamed
    to ``parquet`` when finished: ``convert`` writes one from a whole history,
    ``checkers.ingest.recorded_rows`` one while the history is recorded.  Both write
    it through this class, so their rows are the same."""

    def __init__(self, parquet: Path, tmp: Path) -> None:
        self.parquet, self.tmp = Path(parquet), Path(tmp)
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.writers: dict[str, _Writer] = {}
        self.topics, self.ack_order = TopicIds(), AckOrder()
        for kind in (*KINDS, "poll", "topic"):
            (self.tmp / f"kind={kind}").mkdir(parents=True)
            path = self.tmp / f"kind={kind}" / "part-0.parquet"
            schema = _written_schema(kind)
            self.writers[kind] = _Writer(
                path,
                schema,
                compression="snappy",
                use_dictionary=[n for n in schema.names if n not in _UNIQUE_PER_ROW],
            )

    def write(self, tables: Tables) -> None:
        """Store one chunk's rows (chunks in file order)."""
        for kind, table in tables.items():
            stored = self.topics.stored(table)
            if kind == "line":
                stored = self.ack_order.annotate(stored)
            elif kind == "record":
                stored, polls = link_and_summarise(stored)
                self.writers["poll"].write_table(polls)
            self.writers[kind].write_table(stored)

    def finish(self, covers: Covers) -> None:
        """Close the files, mark the directory with its format and what it
        covers, and put it in place (replacing an older one)."""
        self.writers["topic"].write_table(self.topics.table())
        self._close()
        (self.tmp / FORMAT_FILE).write_text(FORMAT + "\n")
        (self.tmp / COVERS_FILE).write_text(orjson.dumps(asdict(covers)).decode() + "\n")
        (self.tmp / "_SUCCESS").touch()
        shutil.rmtree(self.parquet, ignore_errors=True)
        self.tmp.rename(self.parquet)

    def abort(self) -> None:
        """Drop what was written (nothing once ``finish`` has renamed it)."""
        self._close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _close(self) -> None:
        writers, self.writers = self.writers, {}
        for writer in writers.values():
            writer.close()


def _written_schema(kind: str) -> pa.Schema:
    names = WRITTEN.get(kind, STORED.names)
    return pa.schema([STORED.field(name) for name in names])


class _Writer(pq.ParquetWriter):
    """Writes the columns of its schema, and refuses to drop a value."""

    def write_table(self, table: pa.Table, row_group_size: int | None = None) -> None:
        dropped = [n for n in table.column_names if n not in self.schema.names]
        if any(table[n].null_count != len(table) for n in dropped):
            raise RuntimeError(f"ingest would drop values of {dropped} (see WRITTEN)")
        if table.num_rows == 0:
            # A chunk without rows of this kind: an empty row group is only something
            # for Spark to warn about ("Read empty block"), and recording writes small chunks.
            return
        super().write_table(table.select(self.schema.names), row_group_size)


def read_rows(parquet: Path) -> pa.Table:
    """The rows table as Arrow, every column in every row (the tests read it)."""
    return pq.read_table(parquet, schema=ROWS_TABLE, partitioning="hive")


def is_current(parquet: Path) -> bool:
    """Whether ``parquet`` holds rows in this version's shape (see FORMAT)."""
    mark = Path(parquet) / FORMAT_FILE
    return mark.exists() and mark.read_text().strip() == FORMAT


def covers(parquet: Path) -> Covers | None:
    """What the finished rows directory ``parquet`` covers of its history (None
    if it is unfinished, or was made before the mark existed)."""
    mark = Path(parquet) / COVERS_FILE
    if not (Path(parquet) / "_SUCCESS").exists():
        return None
    try:
        return Covers(**orjson.loads(mark.read_bytes()))
    except (OSError, orjson.JSONDecodeError, TypeError):
        return None


def scan_for_bad_line(history: Path) -> None:
    """Validate ``history`` line by line in Python; raise HistoryError at the first problem."""
    numbering, pairing = _Numbering(Path(history)), TxnPairing(Path(history))
    for start, chunk in _Source(Path(history)).chunks():
        _slow_rows(chunk, start, numbering, pairing)
    numbering.finish()


Tables = dict[str, pa.Table]  # rows of one chunk, by kind


class ChunkRows:
    """Chunks of whole lines of ``history``, handed over in file order, into
    their rows; the numbering and the open transactions carry from chunk to
    chunk.  ``finish`` after the last chunk reports a gap in the numbering."""

    def __init__(self, history: Path) -> None:
        self.numbering, self.pairing = _Numbering(history), TxnPairing(history)

    def rows(self, start: int, chunk: bytes, parsed: Callable[[], _Parsed] | None = None) -> Tables:
        """The rows of ``chunk``, which starts at byte ``start`` of the history
        (the slow path counts lines up to it to name a bad one); ``parsed``:
        its fast-path parse, if already under way."""
        return _in_order(start, chunk, parsed or partial(_fast_rows, chunk), self)

    def finish(self) -> None:
        self.numbering.finish()


def _tables(source: _Source) -> Iterator[Tables]:
    """The rows of each chunk in file order; chunks are parsed two at a time."""
    rows = ChunkRows(source.path)
    with ThreadPoolExecutor(max_workers=2) as pool:
        pending: deque[tuple[int, bytes, Future]] = deque()
        for start, chunk in source.chunks():
            pending.append((start, chunk, pool.submit(_fast_rows, chunk)))
            if len(pending) >= IN_FLIGHT:
                start, chunk, parsed = pending.popleft()
                yield rows.rows(start, chunk, parsed.result)
        while pending:
            start, chunk, parsed = pending.popleft()
            yield rows.rows(start, chunk, parsed.result)
    rows.finish()


def _in_order(start: int, chunk: bytes, parsed: Callable[[], _Parsed], rows: ChunkRows) -> Tables:
    """A chunk's rows once its numbering is checked and its transactions are
    paired: in file order, so neither can run ahead."""
    numbering, pairing = rows.numbering, rows.pairing
    try:
        fast = parsed()
        tables, still_open = pairing.pair(fast.tables)
        if numbering.check_chunk(fast.hid, fast.index):
            pairing.advance(still_open)
            return tables
    except (_SlowPath, pa.ArrowException):  # any type Arrow cannot take: the Python path decides
        pass
    return _slow_rows(chunk, start, numbering, pairing)


class _Source:
    """A history file read in chunks, counting what was read (``covers``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.covers = Covers(0, 0)

    def chunks(self) -> Iterator[tuple[int, bytes]]:
        """(byte offset, whole lines) of about CHUNK_BYTES each.

        A final line without its newline is a write cut short by a crash: it is
        dropped if it does not parse (the prefix before it is still valid), as
        ``harness.history.read_history`` does.
        """
        offset, rest, size, lines = 0, b"", 0, 0
        with open(self.path, "rb") as fh:
            while block := fh.read(CHUNK_BYTES):
                size, lines = size + len(block), lines + block.count(b"\n")
                cut = block.rfind(b"\n") + 1
                if not cut:
                    rest += block
                    continue
                chunk = rest + memoryview(block)[:cut]
                yield offset, chunk
                offset += len(chunk)
                rest = block[cut:]
        self.covers = Covers(size, lines)
        if rest.strip():
            try:
                orjson.loads(rest)
            except orjson.JSONDecodeError:
                return
            yield offset, rest + b"\n"


def _line_number(history: Path, offset: int) -> int:
    """Number of the line that starts at byte ``offset`` (only the slow path needs it)."""
    lines = 1
    with open(history, "rb") as fh:
        while offset > 0:
            block = fh.read(min(offset, CHUNK_BYTES))
            lines += block.count(b"\n")
            offset -= len(block)
    return lines


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
        if len(index) == 0:
            return True
        bounds = pc.min_max(hid)
        if bounds["min"] == bounds["max"]:  # one history, the usual case: already in order
            h, i = hid, index
        else:
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


def _slow_rows(chunk: bytes, start: int, numbering: _Numbering, pairing: TxnPairing) -> Tables:
    first = _line_number(numbering.path, start)
    ops, rows = [], []
    for n, raw in enumerate(bytes(chunk).split(b"\n")[:-1], start=first):
        if not raw.strip():
            continue
        try:
            op = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise HistoryError(f"{numbering.path}: line {n}: not valid JSON ({e})") from e
        checked(op, n, numbering.path)
        hid = op.get("hid") or 0
        numbering.check_line(hid, op["index"], n)
        rows += rows_of(op, pairing.line(hid, op, n))
        ops.append((n, op))
    try:
        return _by_kind(rows)
    except (pa.ArrowException, OverflowError):
        for n, op in ops:  # name the line whose number does not fit its column
            try:
                pa.Table.from_pylist(rows_of(op), ROWS)
            except (pa.ArrowException, OverflowError) as e:
                raise HistoryError(f"{numbering.path}: line {n}: {e}") from e
        raise


def _by_kind(rows: list[dict]) -> Tables:
    grouped: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    for row in rows:
        grouped[kind_of(row)].append(row)
    return {kind: pa.Table.from_pylist(rs, ROWS) for kind, rs in grouped.items() if rs}


# --- fast path: Arrow, with the few untyped lines in Python -----------------------------


@dataclass
class _Parsed:
    tables: Tables
    hid: pa.Array  # per line, in file order, for the numbering check
    index: pa.Array


def _fast_rows(chunk: bytes) -> _Parsed:
    rewrite = _many_pair_lists(chunk)
    patterns = ((_NEMESIS_LINE,) if rewrite else _SPECIAL) + _declared_lines()
    blanked, special = _blank_out(chunk, patterns)
    buffer = pair_lists.rewrite(blanked) if rewrite else pa.py_buffer(blanked)
    lines = pj.read_json(
        buffer, read_options=_ONE_THREAD, parse_options=_HOT_OPTIONS
    ).combine_chunks()
    is_blank = pc.is_valid(_column(lines, "_blank"))
    if (pc.sum(is_blank.cast(pa.int64())).as_py() or 0) != len(special):
        raise _SlowPath  # a marker that is not ours, or a line Arrow skipped
    hid = _column(lines, "hid").fill_null(0)
    index = _column(lines, "index")
    if special:
        hids = pa.array([s.get("hid") or 0 for s in special], pa.int32())
        hid = pc.replace_with_mask(hid, is_blank, hids)
        index = pc.replace_with_mask(index, is_blank, pa.array([s["index"] for s in special]))
        lines = lines.filter(pc.invert(is_blank))
    if index.null_count:
        raise _SlowPath
    tables = _hot_rows(lines)
    if special:
        for kind, table in _by_kind([r for op in special for r in rows_of(op)]).items():
            tables[kind] = pa.concat_tables([tables[kind], table]) if kind in tables else table
    return _Parsed(tables, hid, index)


def _many_pair_lists(chunk: bytes) -> bool:
    """Whether more than INLINE_PAIR_LINES lines of ``chunk`` hold a pair list."""
    at, lines = _find(chunk, _PAIRS, 0), 0
    while at >= 0:
        lines += 1
        if lines > INLINE_PAIR_LINES:
            return True
        at = _find(chunk, _PAIRS, chunk.find(b"\n", at))
    return False


def _blank_out(chunk: bytes, patterns: tuple[bytes, ...]) -> tuple[bytes | bytearray, list[dict]]:
    """The chunk with each line holding one of ``patterns`` replaced by a marker,
    and those lines parsed.

    The marker (padded with spaces to the line's length) keeps the line's
    place, so Arrow returns one row for it and the index column can be
    completed in file order from the parsed lines.
    """
    spans = set()
    for pattern in patterns:
        at = _find(chunk, pattern, 0)
        while at >= 0:
            end = chunk.find(b"\n", at)
            spans.add((chunk.rfind(b"\n", 0, at) + 1, end))
            at = _find(chunk, pattern, end)
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
    return buf, special


def _find(chunk: bytes, pattern: bytes, start: int) -> int:
    """``chunk.find(pattern, start)``, quicker for a pattern that starts with "[".

    bytes.find skips ahead by the pattern's last byte, and '"' ends nearly
    every token of a history, so for '[["' it crawled (7x slower than this
    on a 1e7-op history: 1.9 of the conversion's CPU-seconds).  "[" is rare:
    the C search for that one byte, then a comparison, is quick.
    """
    if not pattern.startswith(b"["):
        return chunk.find(pattern, start)
    at = chunk.find(b"[", start)
    while at >= 0 and not chunk.startswith(pattern, at):
        at = chunk.find(b"[", at + 1)
    return at


def _column(table: pa.Table, name: str) -> pa.Array:
    """One column of a combined table (at most one chunk) as an array."""
    col = table[name]
    return col.chunk(0) if col.num_chunks else pa.array([], col.type)


def _all(*masks: pa.Array) -> bool:
    return all(len(m) == 0 or pc.all(m.fill_null(False)).as_py() for m in masks)


def _hot_rows(hot: pa.Table) -> Tables:
    """Rows of the lines Arrow read, by kind; _SlowPath if any looks wrong.

    The checks mirror ``checkers.ingest.line_rows.check_value``: whatever they let
    through, the Python path would accept too, with the same rows.
    """
    n = len(hot)
    col = {name: _column(hot, name) for name in ("index", "time", "process", "type", "f")}
    value = _column(hot, "value")
    v = {name: pc.struct_field(value, name) for name in _HOT.field("value").type.names}
    f, typ, valid = col["f"], col["type"], pc.is_valid
    send, poll_ok = pc.equal(f, "send"), pc.and_(pc.equal(f, "poll"), pc.equal(typ, "ok"))
    send_ok = pc.and_(send, pc.equal(typ, "ok"))
    own = {name: pc.equal(f, name) for name in _FAST}  # lines of a declared fast path
    if not _all(
        valid(col["time"]),
        valid(col["process"]),
        pc.is_in(typ, pa.array(TYPES)),
        pc.or_(pc.invert(send), pc.and_(valid(v["topic"]), valid(v["value"]))),
        # An ok send's offset may be null (a DUPLICATE_SEQUENCE_NUMBER answer: line_rows).
        pc.or_(pc.invert(send_ok), valid(v["partition"])),
        pc.if_else(poll_ok, valid(v["records"]), pc.is_null(v["records"])),
        *(mask for name, fast in _FAST.items() for mask in fast.valid(own[name], v)),
        pc.or_(pc.not_equal(f, "seek"), valid(value)),
    ):
        raise _SlowPath
    columns = {name: nulls(n, ROWS.field(name).type) for name in ROWS.names}
    columns.update(
        col,
        hid=_column(hot, "hid").fill_null(0),
        nemesis=pa.repeat(False, n),
        topic=v["topic"],
        val=v["value"],
        partition=v["partition"],
        offset=v["offset"],
        error=v["error"],
        final=v["final"].fill_null(False),
        group=v["group"],
        topics=v["topics"],
        reason=v["reason"],
        **{name: v[name] for name in DRAIN_BOUNDS},
    )
    for name, fast in _FAST.items():
        columns.update(fast.own_columns(own[name], typ, col["index"]))
    try:
        pairs = {
            name: pair_lists.column(name, v[name], pc.is_in(f, pa.array(users)))
            for name, users in pair_lists.USED_BY.items()
        }
    except pair_lists.Unreadable as e:
        raise _SlowPath from e
    columns.update(pairs)
    rows = pa.Table.from_arrays([columns[name] for name in ROWS.names], schema=ROWS)
    client = pc.is_in(f, pa.array(["send", "poll"]))
    apart = {kind: pc.equal(f, kind) for kind in APART}
    not_control = client
    for mask in apart.values():
        not_control = pc.or_(not_control, mask)
    tables = {
        "line": rows.filter(client),
        "control": rows.filter(pc.invert(not_control)),
        **{kind: rows.filter(mask) for kind, mask in apart.items()},
        "record": _record_rows(rows, v["records"]),
    }
    for name, fast in _FAST.items():
        if pc.any(own[name]).as_py():
            more = fast.rows(rows.filter(own[name]), v, own[name])
            tables = {
                kind: pa.concat_tables([table, more[kind]]) if kind in more else table
                for kind, table in tables.items()
            }
    return tables


# What a record row copies from its poll line (``line_rows.rows_of``); the
# rest is the record's own or null on a poll line, so it is not copied.
_FROM_POLL_LINE = (
    "hid", "index", "time", "process", "nemesis", "type", "f", "final",
    "error", "reason", "group", "topics",
)  # fmt: skip


def _record_rows(lines: pa.Table, records: pa.Array) -> pa.Table:
    """One row per polled record, carrying its poll line's fields."""
    parent = pc.list_parent_indices(records)
    flat = pc.list_flatten(records)
    r = {name: pc.struct_field(flat, name) for name in ("topic", "partition", "offset", "value")}
    if not _all(pc.is_valid(r["topic"]), pc.is_valid(r["partition"]), pc.is_valid(r["offset"])):
        raise _SlowPath
    length = pc.list_value_length(records).fill_null(0)
    first = pc.subtract(pc.cumulative_sum(length), length)  # each poll's first record
    position = row_numbers(len(flat))
    rows = lines.select(_FROM_POLL_LINE).take(parent)
    columns = {name: nulls(len(flat), ROWS.field(name).type) for name in ROWS.names}
    columns.update(
        {name: rows[name] for name in _FROM_POLL_LINE},
        j=pc.subtract(position, first.take(parent)).cast(pa.int32()),
        topic=r["topic"],
        partition=r["partition"],
        offset=r["offset"],
        val=r["value"],
    )
    return pa.Table.from_arrays([columns[name] for name in ROWS.names], schema=ROWS)
