"""Hand-written histories that pin three rules docs/results.md once stated two
ways (issue 44), each with a look-alike that the other reading would judge
differently.

* **An unknown transaction's values are not acknowledged.**  A torn
  transaction whose outcome was ``info`` (a committed reader read one of its
  values, which proves it committed) is ``torn-transaction`` only; the same
  history with an ``ok`` transaction is also ``lost-write`` and
  ``acked-lost``.  Unproven (nothing of it read, or read only by a
  read_uncommitted consumer), it is nothing.
* **A known aborted value excuses an offset, whatever else is known there.**
  Under read_committed a jump (or a group's commit) over an offset whose
  known values include an aborted one is no ``poll-skip``,
  ``int-poll-skip`` or ``group-commit-past-unread``, even when an ack and a
  read name a committed value there too: that contradiction is
  ``inconsistent-offsets``'.  Without the aborted report the same jumps are
  all three.
* **ww orders committed versions.**  An unknown transaction's delivery
  report places its value in the ww order only once a committed reader
  read one of its values, or the value itself was read (Jepsen's
  ``must-have-committed?``); before that its neighbours follow each other
  directly.  Spark's graph and the reference's must both say so.

The first two are judged by Spark (one batched job per isolation level) and
by the reference, which must give exactly the counts stated.
"""

from __future__ import annotations

from typing import Any

import pytest
from _txn_hand import Cases, check_case, drain

from testkit.builder import HistoryBuilder, poll_mop, send_mop, write_histories
from testkit.reference_cycles import txn_graph

CASES = Cases()
case = CASES.case


def drain_both(b: HistoryBuilder, records: list[tuple[str, int, int, int]]) -> None:
    """A complete final drain of t-0 (high watermark 1) and t-1 (2)."""
    b.assign(99, None, [("t", 0), ("t", 1)])
    b.poll(99, records, final=True)
    b.drain_bounds(99, "t", 0, 0, 1)
    b.drain_bounds(99, "t", 1, 0, 2)


def torn(b: HistoryBuilder, outcome: str, drained: list[tuple[str, int, int, int]]) -> None:
    """A transaction sends 1 (t-0 offset 0) and 2 (t-1 offset 0); a plain producer's
    3 lands at t-1 offset 1.  The drain reads ``drained``, never 2."""
    b.txn(1, [send_mop(1, 0, 0), send_mop(2, 1, 0)], outcome)
    b.send(5, 3, 1, 1)
    drain_both(b, drained)


READ_1_AND_3 = [("t", 0, 0, 1), ("t", 1, 1, 3)]


@case({"torn-transaction": 1, "lost-write": 1, "acked-lost": 1}, "invalid")
def torn_committed_transaction(b):
    """Acknowledged: its unread 2, read past, is also a lost (and drained-away) write."""
    torn(b, "ok", READ_1_AND_3)


@case({"torn-transaction": 1}, "invalid")
def torn_unknown_transaction(b):
    """The drain's read of 1 proves the commit; 2 was never acknowledged, so the loss is
    the torn transaction's alone."""
    torn(b, "info", READ_1_AND_3)


@case({}, "valid")
def unknown_transaction_nothing_read(b):
    """Nothing proves it committed: its reports alone oblige nobody to read them."""
    torn(b, "info", [("t", 1, 1, 3)])


@case({}, "valid", isolation="read_uncommitted")
def unknown_transaction_read_uncommitted(b):
    """Such a consumer reads open transactions: its read of 1 proves no commit."""
    b.assign(7, None, [("t", 0)])
    b.poll(7, [("t", 0, 0, 1)])
    torn(b, "info", [("t", 1, 1, 3)])


@case({"torn-transaction": 1}, "invalid", isolation="read_uncommitted")
def unknown_transaction_drained_read_uncommitted(b):
    """The final drain reads committed data whatever the run's isolation level."""
    torn(b, "info", READ_1_AND_3)


def skip_over_offset_1(b: HistoryBuilder, aborted_report: bool) -> None:
    """2, 3, 4 acked at t-0 offsets 0, 1, 2; an aborted transaction's report may also
    put 1 at offset 1.  Group member 4 polls 0, then 2, and commits 3; transaction
    T (process 2) polls 0 and 2 in one transaction; the drain reads all three."""
    b.assign(4, "g", [("t", 0)])
    b.assign(2, None, [("t", 0)])
    for value in (2, 3, 4):
        b.send(5, value, 0, value - 2)
    if aborted_report:
        b.txn(1, [send_mop(1, 0, 1)], "fail")
    b.poll(4, [("t", 0, 0, 2)])
    b.poll(4, [("t", 0, 2, 4)])
    b.commit(4, "g", [("t", 0, 3)])
    b.txn(2, [poll_mop([("t", 0, 0, 2), ("t", 0, 2, 4)])])
    drain(b, [("t", 0, 0, 2), ("t", 0, 1, 3), ("t", 0, 2, 4)], 3)


@case({"inconsistent-offsets": 1}, "invalid")
def offset_with_an_aborted_and_a_committed_value(b):
    """Offset 1 holds 3 (acked, read) and 1 (an aborted report): which one is there,
    nothing says, so stepping over it proves no skip of committed data."""
    skip_over_offset_1(b, aborted_report=True)


@case({"poll-skip": 1, "int-poll-skip": 1, "group-commit-past-unread": 1}, "invalid")
def offset_with_a_committed_value_only(b):
    """The look-alike: offset 1 holds committed 3 alone, so each jump over it skips data."""
    skip_over_offset_1(b, aborted_report=False)


@pytest.fixture(scope="module")
def judged(spark, tmp_path_factory):
    return CASES.judge(spark, tmp_path_factory.mktemp("txn-rules"))


@pytest.mark.parametrize("name", list(CASES))
def test_hand_written_rule(judged, name):
    check_case(CASES[name], *judged[name])


def test_the_torn_unknown_transaction_names_its_unread_value(judged):
    results, _ = judged["torn_unknown_transaction"]
    (ex,) = results["checks"]["torn-transaction"]["examples"]
    assert ex["unread_values"] == [2] and ex["positions"] == [["t", 1, 0]]


# -- ww: which transactions' reports order their values -----------------------------


def ww_history(read: list[tuple[str, int, int, int]], consumer: bool = False) -> list[dict]:
    """T1 (ok) sends 1 to t-0 offset 0, T2 (info) 2 to t-0 offset 1 and 4 to t-1
    offset 0, T3 (ok) 3 to t-0 offset 2.  The drain reads 1 and 3 and ``read``,
    or (``consumer``) a workload consumer reads ``read`` instead."""
    b = HistoryBuilder()
    b.txn(1, [send_mop(1, 0, 0)])
    b.txn(2, [send_mop(2, 0, 1), send_mop(4, 1, 0)], "info")
    b.txn(3, [send_mop(3, 0, 2)])
    if consumer:
        b.assign(7, None, [("t", 0), ("t", 1)])
        b.poll(7, read)
        read = []
    b.assign(99, None, [("t", 0), ("t", 1)])
    b.poll(99, [("t", 0, 0, 1), ("t", 0, 2, 3), *read], final=True)
    return b.ops


T1, T2, T3 = 0, 2, 4  # invoke indices
DIRECT = {(T1, T3)}  # T2's report alone places nothing
THROUGH = {(T1, T2), (T2, T3)}
WW_CASES: list[tuple[str, list[dict[str, Any]], bool, set[tuple[int, int]]]] = [
    ("unproven", ww_history([]), True, DIRECT),
    ("sibling read", ww_history([("t", 1, 0, 4)]), True, THROUGH),
    ("own value read", ww_history([("t", 0, 1, 2)]), True, THROUGH),
    # Under read_uncommitted only the drain's reads prove a commit; a consumer's
    # read of T2's own value still places that value (it is then a read).
    ("sibling read uncommitted", ww_history([("t", 1, 0, 4)], consumer=True), False, DIRECT),
    ("sibling drained uncommitted", ww_history([("t", 1, 0, 4)]), False, THROUGH),
    ("own read uncommitted", ww_history([("t", 0, 1, 2)], consumer=True), False, THROUGH),
]


def ww_of(edges: dict) -> set[tuple[int, int]]:
    return {pair for pair, kinds in edges.items() if "ww" in kinds}


@pytest.mark.parametrize("name, ops, committed, want", WW_CASES, ids=[c[0] for c in WW_CASES])
def test_reference_ww_orders_only_proven_reports(name, ops, committed, want):
    assert ww_of(txn_graph(ops, read_committed=committed)) == want


@pytest.mark.parametrize("committed", [True, False], ids=["read_committed", "read_uncommitted"])
def test_spark_ww_orders_only_proven_reports(spark, tmp_path, committed):
    from kafka_chaos.checkers.ingest.load import load_history
    from kafka_chaos.checkers.tables import Tables
    from kafka_chaos.checkers.txn.txn_graph import graph

    cases = [c for c in WW_CASES if c[2] == committed]
    path = write_histories(tmp_path / "ww.jsonl", (ops for _, ops, _, _ in cases))
    t = Tables(load_history(spark, path), read_committed=committed)
    try:
        _, explained, _ = graph(t)
        got: dict[int, set] = {hid: set() for hid in range(len(cases))}
        for r in explained.where("kind = 'ww'").select("hid", "src", "dst").collect():
            got[r["hid"]].add((r["src"], r["dst"]))
    finally:
        t.release()
    assert {name: got[hid] for hid, (name, *_) in enumerate(cases)} == {
        name: want for name, _, _, want in cases
    }
