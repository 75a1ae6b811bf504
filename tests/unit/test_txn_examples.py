"""Hand-written transactional histories for what a delivery report says
(docs/results.md, "Transactions"), each judged by Spark (one batched job) and
by the reference, which must give exactly the counts stated.

* A committed send without a delivery report (``offset`` null, with or
  without its partition) is an acknowledged write with no place: read, it is
  fine; never read, it is ``unseen`` and ``acked-lost``, never ``lost-write``.
* An unknown (``info``) or aborted (``fail``) transaction's delivery report
  names the record at its offset: another value read or acked there is
  ``inconsistent-offsets`` (Jepsen's checker takes such a report only once
  a read proves its transaction committed, so it would not see this; see
  docs/results.md, "Delivery reports place records").  The look-alikes, where the
  reads agree with the reports, are valid; a committed reader may still
  step over such an offset (it may hold an aborted record).
"""

from __future__ import annotations

import pytest
from _txn_hand import Cases, check_case, drain

from testkit.builder import send_mop

CASES = Cases()
case = CASES.case


@case({}, "valid")
def committed_without_reports_then_read(b):
    b.txn(1, [send_mop(1, 0), send_mop(2)])  # no report: partition chosen, or neither
    drain(b, [("t", 0, 0, 1), ("t", 0, 1, 2)], 3)


@case({"unseen": 1, "acked-lost": 1}, "invalid")
def committed_without_a_report_never_read(b):
    """Value 2 has no offset: nothing was read past it, so it is unseen, not lost-write,
    although the drain read t-0 past everything else."""
    b.txn(1, [send_mop(1, 0, 0), send_mop(2, 0)])
    drain(b, [("t", 0, 0, 1)], 3)


@case({"inconsistent-offsets": 1}, "invalid")
def unknown_transactions_report_disagrees_with_a_read(b):
    """An unknown transaction's report puts value 1 at offset 0; the drain reads 2 there."""
    b.txn(1, [send_mop(1, 0, 0)], "info")
    b.txn(2, [send_mop(2, 0)])
    drain(b, [("t", 0, 0, 2)], 2)


@case({}, "valid")
def unknown_transactions_report_agrees_with_the_reads(b):
    b.txn(1, [send_mop(1, 0, 0)], "info")
    b.txn(2, [send_mop(2, 0)])
    drain(b, [("t", 0, 0, 1), ("t", 0, 2, 2)], 3)


@case({}, "valid")
def unknown_transaction_that_aborted_is_stepped_over(b):
    """Its record at offset 0 was aborted: the committed drain steps over it legally."""
    b.txn(1, [send_mop(1, 0, 0)], "info")
    b.txn(2, [send_mop(2, 0, 2)])
    drain(b, [("t", 0, 2, 2)], 4)


@case({"inconsistent-offsets": 1}, "invalid")
def aborted_transactions_report_disagrees_with_an_ack(b):
    """An aborted transaction's record took offset 0, yet a plain producer's ack says 3."""
    b.txn(1, [send_mop(1, 0, 0)], "fail")
    b.send(5, 3, 0, 0)
    drain(b, [("t", 0, 0, 3)], 2)


@case({}, "valid")
def aborted_record_is_stepped_over(b):
    b.txn(1, [send_mop(1, 0, 0)], "fail")
    b.send(5, 3, 0, 2)
    drain(b, [("t", 0, 2, 3)], 3)


@pytest.fixture(scope="module")
def judged(spark, tmp_path_factory):
    return CASES.judge(spark, tmp_path_factory.mktemp("txn-examples"))


@pytest.mark.parametrize("name", list(CASES))
def test_hand_written_txn_history(judged, name):
    check_case(CASES[name], *judged[name])


def test_an_unplaced_ack_shows_no_position(judged):
    results, _ = judged["committed_without_a_report_never_read"]
    (unseen,) = results["checks"]["unseen"]["examples"]
    assert unseen["value"] == 2 and unseen["partition"] == 0 and "offset" not in unseen
    assert unseen["neighbours"] == []
    (lost,) = results["checks"]["acked-lost"]["examples"]
    assert lost["value"] == 2 and lost["now_values"] == []


def test_the_conflicting_values_are_named(judged):
    results, _ = judged["unknown_transactions_report_disagrees_with_a_read"]
    (ex,) = results["checks"]["inconsistent-offsets"]["examples"]
    assert (ex["topic"], ex["partition"], ex["offset"], ex["values"]) == ("t", 0, 0, [1, 2])
