"""Each ack's predecessor: the previous ack of the same producer process to the same
partition, written beside every ack by ingest.

nonmonotonic-send compares consecutive acks of one producer stream.  In the
history file they are already in order, so ingest, which reads the file in
order anyway, can pair each ack with its predecessor cheaply (a stable sort
of a chunk's acks, and one remembered ack per stream from chunk to chunk).
Spark would have to sort every ack of the history to do the same: at 1e7
ops the ordered pass had 4e6 acks and 0.8e6 poll entries to sort, and the
acks were most of its cost.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from kafka_chaos.checkers.ingest.null_columns import nulls
from kafka_chaos.checkers.ingest.op_codes import ACK
from kafka_chaos.checkers.ingest.sorted_runs import run_bounds, run_starts

STREAM = ("hid", "process", "topic", "partition")
COLUMNS = (("prev_offset", pa.int64()), ("prev_index", pa.int64()))


class AckOrder:
    """Fills ``prev_offset`` and ``prev_index`` of the acks (with an offset) of
    successive line tables, which must come in file order."""

    def __init__(self) -> None:
        self.last: dict[tuple, tuple[int, int]] = {}  # stream -> (offset, index) of its last ack

    def annotate(self, lines: pa.Table) -> pa.Table:
        """``lines`` (schema ``checkers.ingest.topic_ids.STORED``) with the two columns filled."""
        is_ack = pc.and_(pc.equal(lines["op"], ACK), pc.greater_equal(lines["offset"], 0))
        is_ack = is_ack.fill_null(False).combine_chunks()
        acks = lines.filter(is_ack).select([*STREAM, "offset", "index", "mop"])
        if len(acks) == 0:
            return lines
        # A transaction's acks share its line's index: they follow in micro-op order.
        keys = [(name, "ascending") for name in (*STREAM, "index", "mop")]
        order = pc.sort_indices(acks, sort_keys=keys)
        s = acks.take(order).combine_chunks()
        starts = run_starts(s, STREAM)
        first_rows, last_rows = run_bounds(starts)
        carried = [self.last.get(key, (None, None)) for key in self._streams(s, first_rows)]
        # A stream's first ack here follows the stream's last ack of earlier chunks.
        prev_offset, prev_index = (
            pc.replace_with_mask(_shifted(s[name]), starts, pa.array(column, pa.int64()))
            for name, column in zip(("offset", "index"), zip(*carried, strict=True), strict=True)
        )
        offsets, indices = (s[name].take(last_rows).to_pylist() for name in ("offset", "index"))
        ends = zip(offsets, indices, strict=True)
        self.last.update(zip(self._streams(s, last_rows), ends, strict=True))
        back = pc.sort_indices(order)  # sorted order -> the acks' file order
        for name, values in (("prev_offset", prev_offset), ("prev_index", prev_index)):
            full = pc.replace_with_mask(nulls(len(lines), pa.int64()), is_ack, values.take(back))
            lines = lines.set_column(lines.schema.get_field_index(name), name, full)
        return lines

    @staticmethod
    def _streams(s: pa.Table, rows: pa.Array) -> list[tuple]:
        """The stream keys of ``rows`` (one Python conversion per column: a history
        of many short-lived processes has thousands of streams per chunk)."""
        return list(zip(*(s[name].take(rows).to_pylist() for name in STREAM), strict=True))


def _shifted(col: pa.ChunkedArray) -> pa.Array:
    """Each row's predecessor's value (null for the first row)."""
    values = col.combine_chunks()
    return pa.concat_arrays([pa.nulls(1, values.type), values.slice(0, len(values) - 1)])
