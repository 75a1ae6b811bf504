"""A poll's records of each partition: linked (``prev_offset``) and summarised, by ingest.

Each polled record gets ``prev_offset``, the offset of the record just before
it among the records its poll returned from the same partition (null for the
first).  Each (poll line, partition) gets one ``kind=poll`` row: its first
and last offset and whether its records are one ``straight`` run of
consecutive offsets in order.  The read-order checks (checkers/queue/poll_checks.py)
treat a straight run as one entry; inside the others, a record whose
``prev_offset`` is not one below its own offset is a pair worth judging, so
finding them is a filter, not an ordered pass over every record.  A
transaction's polls are one poll line (its completion's, checkers/ingest/txn_rows.py),
so its reads of a partition are one summary.

Records are linked within their partition because a client may interleave
partitions in one poll: linked over the whole poll, records 5, 6 and 9 of
one partition with two records of another partition in between would hide
a skip of 7 and 8.  A poll's records are always in one chunk, so one stable
sort per chunk does both jobs.  In Spark, grouping every polled record made
the summaries (at 1e7 ops, 8e6 records into 0.8e6 rows: about 2 s of the
check), and ordering the records of crooked polls found the pairs (at 1e7
transactional ops, 8.9e6 records joined with their polls and sorted: the
int-* poll checks took 7.5 and 11.2 s when each was forced alone).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from kafka_chaos.checkers.ingest.null_columns import nulls
from kafka_chaos.checkers.ingest.sorted_runs import run_bounds, run_starts

PREVIOUS = "prev_offset"  # a column of STORED (ack rows use it for their own pairing)
SUMMARY = (("first_offset", pa.int64()), ("last_offset", pa.int64()), ("straight", pa.bool_()))
_GROUP = ("hid", "index", "topic", "partition")  # one poll line's records of one partition
# What a summary row copies from its poll (the rest of its row is null); ``txn``
# marks a transaction's reads, whose inside the int-* checks judge.
KEPT = (
    "hid", "index", "time", "process", "nemesis", "type", "f", "final", "topic", "partition",
    "txn",
)  # fmt: skip


def link_and_summarise(records: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(``records`` with ``prev_offset`` filled, one summary row per poll and
    partition); both in the schema of ``records`` (``checkers.ingest.topic_ids.STORED``)."""
    n = len(records)
    if n == 0:
        return records, records
    keys = [(name, "ascending") for name in (*_GROUP, "j")]
    order = pc.sort_indices(records, sort_keys=keys)  # j order within each group
    grouped = records.select([*KEPT, "offset"]).take(order).combine_chunks()
    starts = run_starts(grouped, _GROUP)
    offset = grouped["offset"].combine_chunks()
    before = pa.concat_arrays([pa.nulls(1, offset.type), offset.slice(0, n - 1)])
    previous = pc.if_else(starts, pa.scalar(None, offset.type), before)
    previous = previous.take(pc.sort_indices(order))  # back to the file's order
    linked = records.set_column(records.schema.get_field_index(PREVIOUS), PREVIOUS, previous)
    return linked, _summaries(grouped, offset, starts, records.schema)


def _summaries(
    grouped: pa.Table, offset: pa.Array, starts: pa.Array, schema: pa.Schema
) -> pa.Table:
    first_rows, ends = run_bounds(starts)
    # A run is straight when each offset is one more than the one before it.
    broken = pc.and_(pc.invert(starts), pc.not_equal(pc.pairwise_diff(offset), 1))
    broken_so_far = pc.cumulative_sum(broken.fill_null(False).cast(pa.int64()))
    straight = pc.equal(broken_so_far.take(ends), broken_so_far.take(first_rows))
    m = len(first_rows)
    columns = {field.name: nulls(m, field.type) for field in schema}
    columns.update({name: grouped[name].take(first_rows) for name in KEPT})
    columns.update(
        first_offset=offset.take(first_rows), last_offset=offset.take(ends), straight=straight
    )
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)
