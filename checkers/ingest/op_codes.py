"""Each send and read row's kind of operation as one small integer, stored with the rows.

The big aggregations ask of every row "is it an invoke, an ack, a failure,
an indeterminate send or a read?".  Asked of the ``f`` and ``type`` strings,
that was a string comparison per row and question (about 7 % of the Java
time of a 1e7-op check); asked of one stored integer it is one comparison.
Ingest computes the column once (``op_column``); Spark reads it as ``op``.
Poll lines and control lines have none (null).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

INVOKE, ACK, FAIL, INFO, READ = range(5)
SEND_TYPES = {"invoke": INVOKE, "ok": ACK, "fail": FAIL, "info": INFO}
TYPE = pa.int8()


def op_column(rows: pa.Table) -> pa.Array:
    """``op`` of every row of ``rows`` (schema ``checkers.ingest.line_rows.ROWS``)."""
    codes = pa.array(list(SEND_TYPES.values()), pa.int32())
    send_op = pc.if_else(
        pc.equal(rows["f"], "send"),
        codes.take(pc.index_in(rows["type"], value_set=pa.array(list(SEND_TYPES)))),
        pa.scalar(None, pa.int32()),
    )
    is_record = pc.is_valid(rows["j"])
    return pc.if_else(is_record, pa.scalar(READ, pa.int32()), send_op).cast(TYPE)
