"""``[topic, partition]`` and ``[topic, partition, offset]`` lists, read by Arrow.

Arrow's JSON reader needs one type per field, and these lists mix strings and
integers (membership lines, commits, seeks, a transaction's ``offsets`` and
``rebalanced``).  A chunk with a few such lines sends them through Python
(``checkers/ingest/convert.py`` special lines).  A transactional history has one on
most committed transactions (``offsets``), and Python took about 170 us a
line: hours at 1e7 ops.  So a chunk with many is rewritten first, by RE2 in
C++: each element ``["t",0,5]`` becomes ``{"topic":"t","pt":[0,5]}``, which
Arrow reads as a struct; ``column`` turns those into the rows' types.
Rewriting a 26 MB transactional chunk took 0.16-0.19 s against 0.70 s for
parsing it.

The rewrite cannot corrupt a line silently.  An element matches only where
``["`` is followed by quote-free text, ``",`` and one or two integers and
``]``.  The ``"`` after ``[`` cannot be inside a string (it would be
escaped), so either it opens the topic, and the match is a pair-list
element, or it closes a string that ended in ``[``, and the rewrite leaves
the bare word ``topic`` after that string: invalid JSON, which sends the
chunk down the Python path.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from kafka_chaos.checkers.ingest.line_rows import DECLARED, ROWS

# The lines whose rows hold each list (``checkers.ingest.line_rows.rows_of``),
# and the lists of a workload's own line kind on its line's row (a
# transaction's ``rebalanced``; workloads/txn_lines.py).
USED_BY = {
    "partitions": ("rebalance", "assign", "committed"),
    "assigned": ("rebalance", "assign"),
    "revoked": ("rebalance", "assign"),
    # a txn's offsets go on its commit row (checkers/ingest/txn_rows.py)
    "offsets": ("commit", "seek", "committed"),
    **{c.name: (kind.f,) for kind in DECLARED for c in kind.columns if c.type == "pairs"},
}
NAMES = tuple(USED_BY)
ITEM = pa.struct([("topic", pa.string()), ("pt", pa.list_(pa.int64()))])  # after the rewrite
TYPE = pa.list_(ITEM)  # what Arrow reads: also [] of a line not rewritten
_ELEMENT = r'\["([^"\\\n]*)",(-?\d+)((?:,-?\d+)?)\]'
_AS_OBJECT = r'{"topic":"\1","pt":[\2\3]}'
_INT32 = (-(2**31), 2**31 - 1)


class Unreadable(Exception):
    """A list the rows cannot hold as read: the Python path must judge its line."""


def rewrite(chunk: bytes | bytearray) -> pa.Buffer:
    """``chunk`` with every pair-list element as an object (see the module doc)."""
    out = pc.replace_substring_regex(pa.array([bytes(chunk)], pa.binary()), _ELEMENT, _AS_OBJECT)
    return out[0].as_buffer()


def column(name: str, lists: pa.Array, used: pa.Array) -> pa.Array:
    """``lists`` (type TYPE) in the rows' type of ``name``, null where not ``used``.

    Unreadable if a used list has an element of the wrong width or a
    partition outside int32 (the Python path names the line).
    """
    type_ = ROWS.field(name).type
    # Selected with plain arrays: if_else over the nested lists took 1.5 s a chunk.
    valid = pc.and_(used, pc.is_valid(lists)).fill_null(False)
    lengths = pc.if_else(valid, pc.list_value_length(lists), 0)
    offsets = pa.concat_arrays(
        [pa.array([0], pa.int32()), pc.cumulative_sum(lengths).cast(pa.int32())]
    )
    flat = pc.list_flatten(lists).filter(valid.take(pc.list_parent_indices(lists)))
    pt = pc.struct_field(flat, "pt")
    width = 2 if name == "offsets" else 1
    partition = pc.list_element(pt, 0) if len(flat) else pa.array([], pa.int64())
    ok = [
        pc.is_valid(pc.struct_field(flat, "topic")),
        pc.equal(pc.list_value_length(pt), width),
        pc.greater_equal(partition, _INT32[0]),
        pc.less_equal(partition, _INT32[1]),
    ]
    if len(flat) and not all(pc.all(m.fill_null(False)).as_py() for m in ok):
        raise Unreadable
    fields = [pc.struct_field(flat, "topic"), partition.cast(pa.int32())]
    if width == 2:
        fields.append(pc.list_element(pt, 1) if len(flat) else pa.array([], pa.int64()))
    items = pa.StructArray.from_arrays(fields, fields=list(type_.value_type))
    return pa.ListArray.from_arrays(offsets, items, type=type_, mask=pc.invert(valid))
