"""Runs of equal keys in a sorted Arrow table: the steps ingest's two orderings share
(``checkers/ingest/ack_order.py``, ``checkers/ingest/poll_positions.py``)."""

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


def run_bounds(starts: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(first row, last row) of each run, from ``run_starts``."""
    firsts = pc.indices_nonzero(starts)
    after_last = pa.concat_arrays([firsts.slice(1), pa.array([len(starts)], firsts.type)])
    return firsts, pc.subtract(after_last, pa.scalar(1, firsts.type))


def row_numbers(n: int) -> pa.Array:
    """0, 1, ..., n - 1 as int64."""
    return pc.subtract(pc.cumulative_sum(pa.repeat(1, n).cast(pa.int64())), 1)
