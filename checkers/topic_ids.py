"""Topic names -> small integers in the stored rows table.

Spark aggregates fixed-width values with a hash map but anything holding a
string with a sort: the per-value aggregation, which keeps the topic of each
value, was a ``SortAggregate`` until topics became integers.  Every
(topic, partition) key of the windows and joins is cheaper too.  The names
are stored as rows of their own (``kind=topic``: ``topic`` is the id,
``name`` the name) and put back only into the examples a check reports.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from checkers import op_codes
from checkers.ack_order import COLUMNS as ACK_ORDER
from checkers.line_rows import ROWS, pair_lists
from checkers.poll_positions import POSITION, SUMMARY

_PAIR, _TRIPLE = pair_lists(pa.int32())
_CHANGED = {
    "topic": pa.int32(),
    "topics": pa.list_(pa.int32()),
    "partitions": _PAIR,
    "assigned": _PAIR,
    "revoked": _PAIR,
    "offsets": _TRIPLE,
    "rebalanced": _PAIR,
}
STORED = pa.schema(
    [pa.field(f.name, _CHANGED.get(f.name, f.type)) for f in ROWS]
    + [("name", pa.string()), ("op", op_codes.TYPE)]  # op: see checkers/op_codes.py
    + list(ACK_ORDER)  # filled by checkers/ack_order.py
    + [POSITION, *SUMMARY]  # filled by checkers/poll_positions.py
)
_LISTS = ("topics", "partitions", "assigned", "revoked", "offsets", "rebalanced")


class TopicIds:
    """Numbers topic names as they appear in file order (a chunk's new names sorted),
    so that the same history always gets the same ids."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def _learn(self, names: Iterable[str | None]) -> None:
        for name in sorted({n for n in names if n is not None} - self.ids.keys()):
            self.ids[name] = len(self.ids)

    def stored(self, kind: str, table: pa.Table) -> pa.Table:
        """``table`` (schema ROWS) in the STORED schema."""
        if kind == "control":  # few rows, nested lists: plain Python is simplest
            rows = table.to_pylist()
            self._learn(name for row in rows for name in _names(row))
            return pa.Table.from_pylist([self._row(row) for row in rows], STORED)
        topic = table["topic"]
        self._learn(pc.unique(topic).to_pylist())
        known = pa.array(list(self.ids), pa.string())
        # Lists (only control lines hold them), names and ingest's annotations stay null.
        columns = {field.name: pa.nulls(len(table), field.type) for field in STORED}
        columns.update((name, table[name]) for name in ROWS.names if name not in _LISTS)
        columns["topic"] = pc.index_in(topic, value_set=known).cast(pa.int32())
        columns["op"] = op_codes.op_column(table)
        return pa.Table.from_arrays([columns[n] for n in STORED.names], schema=STORED)

    def _row(self, row: dict[str, Any]) -> dict[str, Any]:
        ids = self.ids
        out = {**row, "topic": ids.get(row["topic"]) if row["topic"] is not None else None}
        if row["topics"] is not None:
            out["topics"] = [ids[t] for t in row["topics"]]
        for name in _LISTS[1:]:
            if row[name] is not None:
                out[name] = [{**item, "topic": ids[item["topic"]]} for item in row[name]]
        return out

    def table(self) -> pa.Table:
        """The ``kind=topic`` rows: one per name."""
        return pa.Table.from_pylist(
            [{"topic": i, "name": name} for name, i in self.ids.items()], STORED
        )


def _names(row: dict[str, Any]) -> Iterable[str | None]:
    yield row["topic"]
    yield from row["topics"] or ()
    for name in _LISTS[1:]:
        for item in row[name] or ():
            yield item["topic"]
