"""Hand-written histories for what a ``seek`` line means to the read-order checks
(docs/results.md, "Checks" and "Transactions"): a seek to offset o >= 0 names
the next offset its consumer reads there, so the next read b of that
partition by that process is compared with o, as if o - 1 had just been read.

* b > o over an offset the consumer must read: ``poll-skip`` from o - 1 to b;
* b < o: ``nonmonotonic-poll`` from o - 1 to b;
* b == o, or a jump over aborted records and markers only (read_committed): fine;
* a seek to a negative (logical) offset, or a rebalance naming the partition
  after it, is a plain reset: the next read is compared with nothing.

Each history (written as JSONL, judged by Spark in one batched job per
isolation level) must give exactly the counts stated, and the reference too.
"""

from __future__ import annotations

import pytest
from _txn_hand import Cases, check_case, drain

from testkit import reference
from testkit.builder import HistoryBuilder, poll_mop, send_mop

CASES = Cases()
case = CASES.case


def three_committed(b: HistoryBuilder) -> None:
    """Values 0, 1, 2 committed at offsets 0, 1, 2 of t-0 (its marker: 3)."""
    b.assign(10, "g", [("t", 0)])
    b.txn(1, [send_mop(0, 0, 0), send_mop(1, 0, 1), send_mop(2, 0, 2)])


ALL = [("t", 0, o, o) for o in range(3)]


@case({}, "valid")
def rewind_reads_again_from_the_seek(b):
    three_committed(b)
    b.txn(10, [poll_mop(ALL[:2])], "fail")
    b.seek(10, "g", [("t", 0, 0)], reason="rewind after abort")
    b.txn(10, [poll_mop(ALL)], offsets=[["t", 0, 3]])
    drain(b, ALL, 4)


@case({"poll-skip": 1}, "invalid")
def read_after_a_seek_skips_a_committed_offset(b):
    """Told to read from 0, the consumer's next read is 1: it skipped committed 0."""
    three_committed(b)
    b.txn(10, [poll_mop(ALL[:2])], "fail")
    b.seek(10, "g", [("t", 0, 0)], reason="rewind after abort")
    b.txn(10, [poll_mop(ALL[1:])], offsets=[["t", 0, 3]])
    drain(b, ALL, 4)


@case({"nonmonotonic-poll": 1}, "invalid")
def read_behind_the_seek(b):
    """Told to read from 2, the consumer's next read is 1."""
    three_committed(b)
    b.txn(10, [poll_mop(ALL[:1])], offsets=[["t", 0, 1]])
    b.txn(10, [poll_mop(ALL[1:2])], "fail")
    b.seek(10, "g", [("t", 0, 2)], reason="rewind after abort")
    b.txn(10, [poll_mop(ALL[1:])], offsets=[["t", 0, 3]])
    drain(b, ALL, 4)


def aborted_then_marker(b: HistoryBuilder) -> None:
    """t-0: 0 committed (value 0), 1 aborted (value 1), 2 the commit marker of
    value 0's transaction, 3 committed (value 2; its marker 5, after the
    abort marker 4)."""
    b.assign(10, "g", [("t", 0)])
    b.txn(1, [send_mop(0, 0, 0)])
    b.txn(2, [send_mop(1, 0, 1)], "fail")
    b.txn(3, [send_mop(2, 0, 3)])


@case({}, "valid")
def seek_then_a_jump_over_an_aborted_record_and_a_marker(b):
    """The aborted transaction's poll began at 1 and stepped over 1 and 2; its
    rewind seeks back there, and the next read steps over them again."""
    aborted_then_marker(b)
    b.txn(10, [poll_mop([("t", 0, 0, 0)])], offsets=[["t", 0, 1]])
    b.txn(10, [poll_mop([("t", 0, 3, 2)])], "fail")
    b.seek(10, "g", [("t", 0, 1)], reason="rewind after abort")
    b.txn(10, [poll_mop([("t", 0, 3, 2)])], offsets=[["t", 0, 4]])
    drain(b, [("t", 0, 0, 0), ("t", 0, 3, 2)], 6)


@case({"poll-skip": 1}, "invalid", isolation="read_uncommitted")
def read_uncommitted_seek_then_a_jump_over_an_aborted_record(b):
    """The same log, read_uncommitted: the consumer read the aborted record once,
    and after a seek back to it must return it again."""
    aborted_then_marker(b)
    b.txn(10, [poll_mop([("t", 0, 0, 0), ("t", 0, 1, 1)])], offsets=[["t", 0, 2]])
    b.txn(10, [poll_mop([("t", 0, 3, 2)])], "fail")
    b.seek(10, "g", [("t", 0, 1)], reason="rewind")
    b.txn(10, [poll_mop([("t", 0, 3, 2)])], offsets=[["t", 0, 4]])
    drain(b, [("t", 0, 0, 0), ("t", 0, 3, 2)], 6)


@case({}, "valid")
def seek_to_a_logical_offset_is_a_reset(b):
    """A negative offset names no position (e.g. the log end): the next read is
    compared with nothing."""
    three_committed(b)
    b.txn(10, [poll_mop(ALL[:1])])
    b.seek(10, "g", [("t", 0, -1)], reason="to the end")
    b.txn(10, [poll_mop(ALL[2:])])
    drain(b, ALL, 4)


@case({}, "valid")
def rebalance_after_the_seek_is_a_reset(b):
    three_committed(b)
    b.txn(10, [poll_mop(ALL[:1])])
    b.seek(10, "g", [("t", 0, 0)], reason="rewind")
    b.rebalance(10, "g", assigned=[("t", 0)])
    b.txn(10, [poll_mop(ALL[2:])])
    drain(b, ALL, 4)


@pytest.fixture(scope="module")
def judged(spark, tmp_path_factory):
    return CASES.judge(spark, tmp_path_factory.mktemp("seeks"))


@pytest.mark.parametrize("name", list(CASES))
def test_hand_written_seek_history(judged, name):
    results, ops = judged[name]
    ref = check_case(CASES[name], results, ops)
    for check in ("poll-skip", "nonmonotonic-poll"):  # the same anomalies, not only as many
        keys = [reference.key_of(check, ex) for ex in results["checks"][check]["examples"]]
        assert sorted(keys) == sorted(ref.get(check, []))


def _seek_then_read(ops: list[dict]) -> list[int]:
    """The seek line's index and that of the transaction completion after it."""
    seek = next(op["index"] for op in ops if op["f"] == "seek")
    done = (op for op in ops if op["f"] == "txn" and op["type"] != "invoke")
    return [seek, next(op["index"] for op in done if op["index"] > seek)]


def test_a_skip_after_a_seek_starts_one_below_the_seek(judged):
    results, ops = judged["read_after_a_seek_skips_a_committed_offset"]
    (ex,) = results["checks"]["poll-skip"]["examples"]
    assert (ex["process"], ex["from_offset"], ex["to_offset"]) == (10, -1, 1)
    assert (ex["skipped"], ex["skipped_count"]) == ([0], 1)
    assert ex["indices"] == _seek_then_read(ops)
    results, ops = judged["read_uncommitted_seek_then_a_jump_over_an_aborted_record"]
    (ex,) = results["checks"]["poll-skip"]["examples"]
    assert (ex["from_offset"], ex["to_offset"], ex["skipped"]) == (0, 3, [1])


def test_a_read_behind_a_seek_is_compared_with_it(judged):
    results, ops = judged["read_behind_the_seek"]
    (ex,) = results["checks"]["nonmonotonic-poll"]["examples"]
    assert (ex["process"], ex["from_offset"], ex["to_offset"]) == (10, 1, 1)
    assert ex["indices"] == _seek_then_read(ops)
