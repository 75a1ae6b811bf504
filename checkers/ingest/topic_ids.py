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

import pyarrow as pa
import pyarrow.compute as pc
from kafka_chaos.checkers.ingest import op_codes
from kafka_chaos.checkers.ingest.ack_order import COLUMNS as ACK_ORDER
from kafka_chaos.checkers.ingest.line_rows import COLUMNS, ROWS, pair_lists
from kafka_chaos.checkers.ingest.null_columns import nulls
from kafka_chaos.checkers.ingest.poll_positions import SUMMARY

_PAIR, _TRIPLE = pair_lists(pa.int32())
_CHANGED = {
    "topic": pa.int32(),
    "topics": pa.list_(pa.int32()),
    "partitions": _PAIR,
    "assigned": _PAIR,
    "revoked": _PAIR,
    "offsets": _TRIPLE,
    # and the pair lists of the workloads' own line kinds (a transaction's ``rebalanced``)
    **{c.name: _PAIR for c in COLUMNS if c.type == "pairs"},
}
STORED = pa.schema(
    [pa.field(f.name, _CHANGED.get(f.name, f.type)) for f in ROWS]
    + [("name", pa.string()), ("op", op_codes.TYPE)]  # op: see checkers/ingest/op_codes.py
    + list(ACK_ORDER)  # filled by checkers/ingest/ack_order.py (prev_offset: and poll_positions.py)
    + list(SUMMARY)  # filled by checkers/ingest/poll_positions.py
)
_LISTS = ("topics", *(name for name in _CHANGED if name not in ("topic", "topics")))
# A topic of another cluster than the run's first is named ``<cluster>/<topic>``
# (workloads/cluster_history.py).  The queue checks judge each cluster's own
# traffic, so a value seen there is keyed apart from the same value on dc1:
# MirrorMaker's copy of a value is not a second write of it (the mirror
# checks judge copies, from the history itself).  Readable in examples:
# dc2's 5399 is 1000000000005399.
OTHER_CLUSTER_VALUE = 10**15


class TopicIds:
    """Numbers topic names as they appear in file order (a chunk's new names sorted),
    so that the same history always gets the same ids."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def _learn(self, names: Iterable[str | None]) -> None:
        for name in sorted({n for n in names if n is not None} - self.ids.keys()):
            self.ids[name] = len(self.ids)

    def stored(self, table: pa.Table) -> pa.Table:
        """``table`` (schema ROWS) in the STORED schema.

        Lists are mapped with Arrow too: a transactional history has a
        control row per transaction line, and mapping them row by row in
        Python was half of its conversion.
        """
        table = table.combine_chunks()
        topic = _array(table["topic"])
        lists = {name: _array(table[name]) for name in _LISTS}
        self._learn(
            pc.unique(
                pa.concat_arrays([topic, *(_topics_of(name, col) for name, col in lists.items())])
            ).to_pylist()
        )
        known = pa.array(list(self.ids), pa.string())
        # Names and ingest's annotations stay null.
        columns = {field.name: nulls(len(table), field.type) for field in STORED}
        columns.update((name, table[name]) for name in ROWS.names)
        columns["topic"] = pc.index_in(topic, value_set=known).cast(pa.int32())
        for name, col in lists.items():
            columns[name] = _mapped(col, known, STORED.field(name).type)
        columns["op"] = op_codes.op_column(table)
        columns["val"] = self._cluster_keyed(columns["val"], columns["topic"])
        return pa.Table.from_arrays([columns[n] for n in STORED.names], schema=STORED)

    def _cluster_keyed(self, val: pa.ChunkedArray | pa.Array, topic: pa.Array) -> pa.Array:
        """``val``, shifted by OTHER_CLUSTER_VALUE where the topic is another cluster's."""
        others = [i for name, i in self.ids.items() if "/" in name]
        if not others:
            return val
        there = pc.is_in(topic, value_set=pa.array(others, pa.int32())).fill_null(False)
        return pc.if_else(there, pc.add(val, OTHER_CLUSTER_VALUE), val)

    def table(self) -> pa.Table:
        """The ``kind=topic`` rows: one per name."""
        return pa.Table.from_pylist(
            [{"topic": i, "name": name} for name, i in self.ids.items()], STORED
        )


def _array(col: pa.ChunkedArray) -> pa.Array:
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _topics_of(name: str, col: pa.Array) -> pa.Array:
    """The topic names in the list column ``col``."""
    flat = pc.list_flatten(col)
    return flat if name == "topics" else pc.struct_field(flat, "topic")


def _mapped(col: pa.Array, known: pa.Array, type_: pa.DataType) -> pa.Array:
    """The list column ``col`` with its topic names as their ids (``type_``)."""
    lengths = pc.list_value_length(col).fill_null(0)
    offsets = pa.concat_arrays(
        [pa.array([0], pa.int32()), pc.cumulative_sum(lengths).cast(pa.int32())]
    )
    flat = pc.list_flatten(col)  # a null list gives nothing, as its length 0 says
    if pa.types.is_struct(flat.type):
        fields = [
            pc.index_in(pc.struct_field(flat, f.name), value_set=known).cast(pa.int32())
            if f.name == "topic"
            else pc.struct_field(flat, f.name)
            for f in flat.type
        ]
        values = pa.StructArray.from_arrays(fields, fields=list(type_.value_type))
    else:
        values = pc.index_in(flat, value_set=known).cast(pa.int32())
    return pa.ListArray.from_arrays(offsets, values, type=type_, mask=pc.is_null(col))
