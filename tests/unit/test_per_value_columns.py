"""``Tables.per_value`` skips the transactional aggregates on a history without
transaction lines, and keeps its shape.

Why: at 1e7 queue ops the seven transactional columns were a third of
per_value's aggregates, all null or unread there.  Checks union and join
per_value's columns, so a history with transactions and one without must
give the same column names and types; and a history with transactions must
still fill them (or the transactional checks would see nothing).
"""

from __future__ import annotations

from testkit import synthetic, synthetic_txn

TXN_COLUMNS = ("abort_index", "txn", "done_index", "done_op", "done_offset", "source")


def _per_value(spark, path):
    from kafka_chaos.checkers.ingest.load import load_history
    from kafka_chaos.checkers.tables import Tables

    t = Tables(load_history(spark, path))
    try:
        pv = t.per_value
        filled = (
            pv.select(*[(pv[c].isNotNull().cast("int")).alias(c) for c in TXN_COLUMNS])
            .groupBy()
            .sum()
            .first()
        )
        return t.has_txns, pv.dtypes, dict(zip(TXN_COLUMNS, filled, strict=True))
    finally:
        t.release()


def test_per_value_has_one_shape_with_and_without_transactions(spark, tmp_path) -> None:
    queue, txn = tmp_path / "queue.jsonl", tmp_path / "txn.jsonl"
    synthetic.generate(3000, queue)
    synthetic_txn.write(txn, 3000)
    q_txns, q_types, q_filled = _per_value(spark, queue)
    t_txns, t_types, t_filled = _per_value(spark, txn)
    assert (q_txns, t_txns) == (False, True)
    assert q_types == t_types
    assert set(q_filled.values()) == {0}, q_filled
    # done_index and txn on every completed transactional send; aborts and
    # consume-transform-produce sources happen in the generated history too
    assert all(t_filled[c] > 0 for c in ("txn", "done_index", "done_op", "done_offset")), t_filled
