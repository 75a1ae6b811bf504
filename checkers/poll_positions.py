"""A poll's records of each partition: numbered (``jp``) and summarised, by ingest.

Each polled record gets ``jp``, its position among the records its poll
returned from the same partition (``j`` is its position in the whole poll).
Each (poll line, partition) gets one ``kind=poll`` row: its first and last
offset and whether its records are one ``straight`` run of consecutive
offsets in order.  The read-order checks (checkers/poll_checks.py) treat a
straight run as one entry and look inside the others record by record.  A
transaction's polls are one poll line (its completion's, checkers/txn_rows.py),
so its reads of a partition are one summary.

Positions are counted within the partition because a client may interleave
partitions in one poll: counted over the whole poll, records 5, 6 and 9 of
one partition at positions 0, 1 and 4 (two records of another partition in
between) looked straight, hiding a skip of 7 and 8.  A poll's records are
always in one chunk, so one stable sort per chunk does both jobs; Spark
grouped every polled record to make the summaries (at 1e7 ops, 8e6 records
into 0.8e6 rows: about 2 s of the check).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from checkers.sorted_runs import row_numbers, run_bounds, run_starts

POSITION = ("jp", pa.int32())
SUMMARY = (("first_offset", pa.int64()), ("last_offset", pa.int64()), ("straight", pa.bool_()))
_GROUP = ("hid", "index", "topic", "partition")  # one poll line's records of one partition
# What a summary row copies from its poll (the rest of its row is null); ``txn``
# marks a transaction's reads, whose inside the int-* checks judge.
KEPT = (
    "hid", "index", "time", "process", "nemesis", "type", "f", "final", "topic", "partition",
    "txn",
)  # fmt: skip


def number_and_summarise(records: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(``records`` with ``jp`` filled, one summary row per poll and partition);
    both in the schema of ``records`` (``checkers.topic_ids.STORED``)."""
    n = len(records)
    if n == 0:
        return records, records
    keys = [(name, "ascending") for name in (*_GROUP, "j")]
    order = pc.sort_indices(records, sort_keys=keys)  # j order within each group
    grouped = records.select([*KEPT, "offset"]).take(order).combine_chunks()
    starts = run_starts(grouped, _GROUP)
    row = row_numbers(n)
    group_start = pc.fill_null_forward(pc.if_else(starts, row, pa.scalar(None, pa.int64())))
    jp = pc.subtract(row, group_start).take(pc.sort_indices(order)).cast(POSITION[1])
    numbered = records.set_column(records.schema.get_field_index(POSITION[0]), POSITION[0], jp)
    return numbered, _summaries(grouped, starts, records.schema)


def _summaries(grouped: pa.Table, starts: pa.Array, schema: pa.Schema) -> pa.Table:
    offset = grouped["offset"].combine_chunks()
    first_rows, ends = run_bounds(starts)
    # A run is straight when each offset is one more than the one before it.
    broken = pc.and_(pc.invert(starts), pc.not_equal(pc.pairwise_diff(offset), 1))
    broken_so_far = pc.cumulative_sum(broken.fill_null(False).cast(pa.int64()))
    straight = pc.equal(broken_so_far.take(ends), broken_so_far.take(first_rows))
    m = len(first_rows)
    columns = {field.name: pa.nulls(m, field.type) for field in schema}
    columns.update({name: grouped[name].take(first_rows) for name in KEPT})
    columns.update(
        first_offset=offset.take(first_rows), last_offset=offset.take(ends), straight=straight
    )
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)
