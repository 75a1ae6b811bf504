"""Runs of equal keys in a sorted Arrow table: the one step ingest's two orderings share
(``checkers/ack_order.py``, ``checkers/poll_positions.py``)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def run_starts(table: pa.Table, keys: tuple[str, ...]) -> pa.Array:
    """True where a row's ``keys`` differ from the previous row's (and on the first
    row); ``table`` is sorted by ``keys`` and they are numeric columns."""
    starts = pa.repeat(False, len(table))
    for name in keys:
        changed = pc.not_equal(pc.pairwise_diff(table[name].combine_chunks()), 0)
        starts = pc.or_(starts, changed.fill_null(True))  # the first row's diff is null
    return starts
