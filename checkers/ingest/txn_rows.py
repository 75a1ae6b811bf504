"""Transaction lines -> rows with Arrow (ingest's fast path), and each completion
paired with its invoke.

A ``txn`` line is one operation holding several micro-ops (docs/history.md),
but the checks read sends, polls and commits, so ingest gives it the rows a
queue history would have (docs/results.md, "txn rows"): its own ``txn``
row, a ``line`` row per send micro-op, on a completion one ``line`` row for
all its polls with a ``record`` row per record, and a ``commit`` row for the
offsets it sent.  ``kafka_chaos.workloads.txn_lines.rows`` does the same line by line
in Python; this module must give exactly those rows (tests/unit/test_txn_ingest.py).

Transactional histories are mostly ``txn`` lines, so they are expanded here
with Arrow's list kernels (``list_flatten``/``list_parent_indices``) rather
than in Python: 1e7-op histories must convert in seconds.

Every row of a transaction carries ``txn``, its invoke's index.  The worker
that parses a chunk cannot know it for a completion whose invoke lies in an
earlier chunk, so those rows get ``TXN_PENDING`` and ``TxnPairing`` fills
them in file order (a process has at most one transaction in flight).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from kafka_chaos.checkers.ingest import pair_lists
from kafka_chaos.checkers.ingest.line_rows import ROWS, TXN_PENDING
from kafka_chaos.checkers.ingest.null_columns import nulls
from kafka_chaos.checkers.ingest.sorted_runs import row_numbers, run_starts
from kafka_chaos.harness.errors import HistoryError
from kafka_chaos.harness.history import NEMESIS

Tables = dict[str, pa.Table]  # rows of one chunk, by kind

RECORD = pa.struct(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("value", pa.int64()),
    ]
)
# What Arrow reads of a micro-op; every other field (key, error) is ignored.
MOP = pa.struct(
    [
        ("f", pa.string()),
        ("topic", pa.string()),
        ("value", pa.int64()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("source", pa.int64()),
        ("skipped", pa.bool_()),
        ("records", pa.list_(RECORD)),
    ]
)
_OF_THE_LINE = ("hid", "index", "time", "process", "nemesis", "type")
# Packing (hid, index) into one long for the pairing's lookups.
_INDEX_BITS = 40


class SlowPath(Exception):
    """The fast path cannot vouch for a chunk; the Python path will judge it."""


def _all(*masks: pa.Array) -> bool:
    return all(len(m) == 0 or pc.all(m.fill_null(False)).as_py() for m in masks)


def _rows(n: int, columns: dict[str, Any]) -> pa.Table:
    """A ROWS table of ``n`` rows: ``columns`` (arrays, or scalars repeated), the rest null."""
    full = {}
    for field in ROWS:
        col = columns.get(field.name)
        if col is None:
            full[field.name] = nulls(n, field.type)
        elif isinstance(col, (pa.Array, pa.ChunkedArray)):
            full[field.name] = col.cast(field.type)
        else:
            full[field.name] = pa.array([col] * n, field.type)
    return pa.Table.from_arrays([full[name] for name in ROWS.names], schema=ROWS)


# The fast path of the txn workload's line kind (``arrow`` of
# workloads/txn_lines.py's declaration; checkers/ingest/convert.py asks):
# what Arrow reads of its lines' value beyond the history contract's fields,
# what must hold of them, the columns of their own rows, and their rows.
VALUE = (("ops", pa.list_(MOP)),)  # a transaction's micro-ops


def valid(is_line: pa.Array, v: dict[str, pa.Array]) -> list[pa.Array]:
    """Masks that must all hold, or the Python path judges the chunk: a
    transaction line has micro-ops, and no other line does."""
    return [pc.if_else(is_line, pc.is_valid(v["ops"]), pc.is_null(v["ops"]))]


def own_columns(is_line: pa.Array, typ: pa.Array, index: pa.Array) -> dict[str, pa.Array]:
    """``txn`` of the lines' own rows: an invoke's index, ``TXN_PENDING`` on a
    completion, null on other lines."""
    own = pc.if_else(pc.equal(typ, "invoke"), index, pa.scalar(TXN_PENDING, pa.int64()))
    return {"txn": pc.if_else(is_line, own, pa.scalar(None, pa.int64()))}


def rows(lines: pa.Table, v: dict[str, pa.Array], is_line: pa.Array) -> Tables:
    """The rows the transaction lines ``lines`` (their own rows) give beyond
    their own, by kind; ``v``: the chunk's values' fields, ``is_line``: which
    lines of the chunk ``lines`` are.  A transaction's offsets go on its
    commit row, not on its own."""
    try:
        offsets = pair_lists.column(
            "offsets", v["offsets"].filter(is_line), pa.repeat(True, len(lines))
        )
    except pair_lists.Unreadable as e:
        raise SlowPath from e
    return expand(lines, v["ops"].filter(is_line), offsets)


def expand(lines: pa.Table, ops: pa.Array, offsets: pa.Array) -> Tables:
    """The rows a transaction's micro-ops give, by kind (its own row is made with
    the other lines' rows).  ``lines``: the txn lines' own rows (schema ROWS),
    ``ops`` their ``value.ops``, ``offsets`` their ``value.offsets`` (null if
    none; in the rows' type).  Raises SlowPath where
    ``checkers.ingest.line_rows.check_value`` might object.
    """
    typ, index = lines["type"], lines["index"]
    done = pc.not_equal(typ, "invoke")
    txn = pc.if_else(done, pa.scalar(TXN_PENDING, pa.int64()), index)
    if not _all(pc.is_valid(ops)):
        raise SlowPath
    parent = pc.list_parent_indices(ops)
    flat = pc.list_flatten(ops)
    m = {name: pc.struct_field(flat, name) for name in MOP.names}
    length = pc.list_value_length(ops)
    first = pc.subtract(pc.cumulative_sum(length), length).cast(pa.int64())
    k = pc.subtract(row_numbers(len(flat)), first.take(parent))
    line_done = done.take(parent)
    skipped = m["skipped"].fill_null(False)
    is_send, is_poll = pc.equal(m["f"], "send"), pc.equal(m["f"], "poll")
    ran_poll = pc.and_(is_poll, pc.and_(line_done, pc.invert(skipped)))
    with_records = pc.and_(is_poll, pc.is_valid(m["records"]))
    all_records = pc.list_flatten(m["records"].filter(with_records))
    if not _all(
        pc.or_(is_send, is_poll),
        pc.or_(pc.invert(is_send), pc.and_(pc.is_valid(m["value"]), pc.is_valid(m["topic"]))),
        # An offset needs its partition (``check_value``); either may be null.
        pc.or_(pc.invert(pc.is_valid(m["offset"])), pc.is_valid(m["partition"])),
        pc.or_(pc.invert(ran_poll), pc.is_valid(m["records"])),
        *(
            pc.is_valid(pc.struct_field(all_records, name))
            for name in ("topic", "partition", "offset")
        ),
    ):
        raise SlowPath
    own = lines.select(_OF_THE_LINE)
    sends = _send_rows(own, lines, m, k, parent, is_send, skipped, txn)
    polls, records = _polls(own, m, k, parent, ran_poll, txn)
    tables = {"line": pa.concat_tables([sends, polls]), "record": records}
    commits = pc.and_(done, pc.is_valid(offsets))
    c = own.filter(commits)
    tables["commit"] = _rows(
        len(c),
        {
            **{name: c[name] for name in _OF_THE_LINE},
            "f": "commit",
            "final": False,
            "error": lines["error"].filter(commits),
            "group": lines["group"].filter(commits),
            "offsets": offsets.filter(commits),
            "txn": txn.filter(commits),
        },
    )
    return tables


def _send_rows(own, lines, m, k, parent, is_send, skipped, txn) -> pa.Table:
    """A row per send micro-op: invoked, or completed with its transaction's outcome."""
    at = parent.filter(is_send)
    done = pc.not_equal(lines["type"].take(at), "invoke")
    skipped = skipped.filter(is_send)
    null_str, null_long = pa.scalar(None, pa.string()), pa.scalar(None, pa.int64())
    return _rows(
        len(at),
        {
            **{name: own[name].take(at) for name in _OF_THE_LINE},
            "type": pc.if_else(pc.and_(done, skipped), "fail", lines["type"].take(at)),
            "f": "send",
            "final": False,
            "error": pc.if_else(done, lines["error"].take(at), null_str),
            "topic": m["topic"].filter(is_send),
            "val": m["value"].filter(is_send),
            "partition": m["partition"].filter(is_send),
            "offset": pc.if_else(done, m["offset"].filter(is_send), null_long),
            "source": m["source"].filter(is_send),
            "txn": txn.take(at),
            "mop": k.filter(is_send),
        },
    )


def _polls(own, m, k, parent, ran_poll, txn) -> tuple[pa.Table, pa.Table]:
    """One poll row per completion that ran a poll, and a row per record its
    polls returned, numbered (``j``) across all of them."""
    at = parent.filter(ran_poll)
    polled = pc.unique(at)  # parents ascend: the lines in order
    poll_rows = _rows(
        len(polled),
        {
            **{name: own[name].take(polled) for name in _OF_THE_LINE},
            "type": "ok",
            "f": "poll",
            "final": False,
            "txn": txn.take(polled),
        },
    )
    records = m["records"].filter(ran_poll)
    of_mop = pc.list_parent_indices(records)
    flat = pc.list_flatten(records)
    line = at.take(of_mop)
    n = len(flat)
    row = row_numbers(n)
    starts = run_starts(pa.table({"line": line}), ("line",))
    first = pc.fill_null_forward(pc.if_else(starts, row, pa.scalar(None, pa.int64())))
    r = {name: pc.struct_field(flat, name) for name in RECORD.names}
    record_rows = _rows(
        n,
        {
            **{name: own[name].take(line) for name in _OF_THE_LINE},
            "type": "ok",
            "f": "poll",
            "final": False,
            "txn": txn.take(line),
            "j": pc.subtract(row, first),
            "mop": k.filter(ran_poll).take(of_mop),
            "topic": r["topic"],
            "partition": r["partition"],
            "offset": r["offset"],
            "val": r["value"],
        },
    )
    return poll_rows, record_rows


class TxnPairing:
    """Each transaction's completion paired with its invoke, over the chunks in
    file order: the open transaction of each (history, process).

    The Python path asks line by line (``line``) and names a bad line; the fast
    path pairs a whole chunk at once (``pair``), and takes the Python path for
    a chunk it cannot pair, so that line is named.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.open: dict[tuple[int, int], int] = {}  # (hid, process) -> its invoke's index

    def line(self, hid: int, op: dict[str, Any], lineno: int) -> int | None:
        """The invoke index of ``op`` if it completes a transaction (else None)."""
        if op["f"] != "txn" or op["process"] == NEMESIS:
            return None
        key, index = (hid, op["process"]), op["index"]
        if op["type"] == "invoke":
            if key in self.open:
                raise HistoryError(
                    f"{self.path}: line {lineno}: txn invoke while process {key[1]}'s "
                    f"transaction invoked at index {self.open[key]} has no completion"
                )
            self.open[key] = index
            return None
        if key not in self.open:
            raise HistoryError(
                f"{self.path}: line {lineno}: txn {op['type']} of process {key[1]} "
                "without an invoke"
            )
        return self.open.pop(key)

    def pair(self, tables: Tables) -> tuple[Tables, dict[tuple[int, int], int | None]]:
        """``tables`` with every ``TXN_PENDING`` filled, and the open transactions
        after them (apply with ``advance`` once the chunk is accepted).  SlowPath
        if a completion has no invoke, or an invoke finds one still open."""
        own = tables.get("txn")
        if own is None:
            return tables, {}
        txns = own.filter(pc.is_valid(own["txn"])).select(["hid", "process", "index", "type"])
        if len(txns) == 0:
            return tables, {}
        keys = [(name, "ascending") for name in ("hid", "process", "index")]
        s = txns.take(pc.sort_indices(txns, sort_keys=keys)).combine_chunks()
        starts = run_starts(s, ("hid", "process"))
        at_start = pc.indices_nonzero(starts).to_pylist()
        streams = [(s["hid"][i].as_py(), s["process"][i].as_py()) for i in at_start]
        index, hid = s["index"].combine_chunks(), s["hid"].combine_chunks()
        is_invoke = pc.equal(s["type"].combine_chunks(), "invoke")
        own_open = pc.if_else(is_invoke, index, pa.scalar(None, pa.int64()))
        before = pa.concat_arrays([pa.nulls(1, pa.int64()), own_open[:-1]])
        carried = pa.array([self.open.get(key) for key in streams], pa.int64())
        before = pc.replace_with_mask(before, starts, carried)
        if not _all(pc.if_else(is_invoke, pc.is_null(before), pc.is_valid(before))):
            raise SlowPath
        ends = [*(i - 1 for i in at_start[1:]), len(s) - 1]
        after = {key: own_open[i].as_py() for key, i in zip(streams, ends, strict=True)}
        done = pc.invert(is_invoke)
        completions = _packed(hid.filter(done), index.filter(done))
        invokes = before.filter(done)
        filled = {kind: _fill(t, completions, invokes) for kind, t in tables.items()}
        return filled, after

    def advance(self, after: dict[tuple[int, int], int | None]) -> None:
        for key, index in after.items():
            if index is None:
                self.open.pop(key, None)
            else:
                self.open[key] = index


def _packed(hid: pa.Array, index: pa.Array) -> pa.Array:
    """(hid, index) as one long; SlowPath outside the range that packs exactly."""
    if len(index) and not _all(
        pc.less(index, 1 << _INDEX_BITS),
        pc.greater_equal(index, 0),
        pc.less(hid, 1 << (62 - _INDEX_BITS)),
        pc.greater_equal(hid, 0),
    ):
        raise SlowPath
    return pc.add(pc.shift_left(hid.cast(pa.int64()), _INDEX_BITS), index)


def _fill(table: pa.Table, completions: pa.Array, invokes: pa.Array) -> pa.Table:
    """``table`` with each ``TXN_PENDING`` replaced by its line's invoke index."""
    table = table.combine_chunks()
    txn = table["txn"].combine_chunks()
    pending = pc.equal(txn, TXN_PENDING).fill_null(False)
    if not pc.any(pending).as_py():
        return table
    rows = table.filter(pending)
    keys = _packed(rows["hid"].combine_chunks(), rows["index"].combine_chunks())
    txn = pc.replace_with_mask(txn, pending, invokes.take(pc.index_in(keys, completions)))
    return table.set_column(table.schema.get_field_index("txn"), "txn", txn)
