"""What a group member still owns after its recorded rebalances (``workloads.consumer.Ownership``):
recorded as revoked after a clean close() that left it unsaid."""

from __future__ import annotations

from kafka_chaos.workloads.consumer import Ownership


def test_assignments_add_and_revocations_remove() -> None:
    own = Ownership()
    own.update([["t", 0], ["t", 1]], [])
    own.update([], [["t", 0]])
    own.update([["t", 3]], [])
    assert own.left_over() == [["t", 1], ["t", 3]]


def test_an_eager_rebalance_revokes_all_then_assigns_again() -> None:
    own = Ownership()
    own.update([["t", 2], ["t", 3]], [])
    own.update([], [["t", 2], ["t", 3]])  # on_revoke, then on_assign, as in the CI run
    own.update([["t", 2], ["t", 3]], [])
    assert own.left_over() == [["t", 2], ["t", 3]]
    own.update([], [["t", 3], ["t", 2]])  # a lost or revoked list in any order
    assert own.left_over() == [] and not own.owned


def test_topics_sort_before_partitions() -> None:
    own = Ownership()
    own.update([["b", 0], ["a", 10], ["a", 2]], [])
    assert own.left_over() == [["a", 2], ["a", 10], ["b", 0]]


def test_after_a_close_what_is_left_is_revoked_once_and_a_closed_history_is_no_error() -> None:
    own, recorded = Ownership(), []

    def rebalance(assigned: list, revoked: list, **extra: object) -> None:
        recorded.append((assigned, revoked, extra))
        own.update(assigned, revoked)

    own.closed(rebalance)
    assert recorded == []  # nothing owned: nothing to say
    own.update([["t", 1]], [])
    own.closed(rebalance)
    assert recorded == [([], [["t", 1]], {"closed": True})]

    def history_closed(assigned: list, revoked: list, **extra: object) -> None:
        raise ValueError("I/O operation on closed file")

    own.update([["t", 2]], [])
    own.closed(history_closed)  # the run is over: nothing to record, no error
