"""librdkafka's numbering of a DUPLICATE_SEQUENCE_NUMBER batch (-1, 0, 1, ...) is not a place.

The sequences are those of the Tansu debug run (evidence/tansu-storage-partition-0.6.0/
debug-run-20261128T193755Z, history l. 106869-106870): a 2-message batch answered
DUPLICATE, reported at offset -1 (confluent-kafka: None) and 0.
"""

from __future__ import annotations

from kafka_chaos.workloads.delivery_offsets import DuplicateBatchOffsets


def test_a_duplicate_answer_and_its_batch_mates_have_no_place() -> None:
    o = DuplicateBatchOffsets()
    assert [o.position("t", 3, x) for x in (7650, 7651, None, 0, 1, 2)] == [
        7650, 7651, None, None, None, None,
    ]  # fmt: skip
    assert o.position("t", 3, 9882) == 9882  # the next batch, at its real offset
    assert o.position("t", 3, 3) == 3  # the count is over: offsets are trusted again
    assert not o.waiting


def test_minus_one_is_read_like_none() -> None:
    o = DuplicateBatchOffsets()
    assert [o.position("t", 0, x) for x in (-1, 0, 1, 40)] == [None, None, None, 40]


def test_partitions_and_topics_count_apart() -> None:
    o = DuplicateBatchOffsets()
    assert o.position("t", 1, None) is None
    assert o.position("t", 2, 0) == 0  # another partition's first record is at 0
    assert o.position("u", 1, 0) == 0  # so is another topic's
    assert o.position("t", 1, 0) is None  # partition 1's batch-mate
    assert o.position("t", 2, 1) == 1


def test_a_batch_of_one_leaves_nothing_waiting_once_the_next_report_comes() -> None:
    o = DuplicateBatchOffsets()
    assert o.position("t", 0, None) is None
    assert o.position("t", 0, 500) == 500
    assert not o.waiting
