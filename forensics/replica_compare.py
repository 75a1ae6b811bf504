"""Compare copies of one partition's log, offset by offset.

A live follower is compared with the leader below the high watermark: the
records Kafka promises every in-sync replica holds.  A copy of a killed
leader taken before it rejoined is compared below the high watermark that
leader had checkpointed: records it held as committed that the current log
holds differently are what the rejoin truncated away, and its values there
that no replica holds any more are gone for good.  Above that watermark a
different tail is Kafka working as designed (never committed, so never
acknowledged with acks=all); it is counted apart, never as divergence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kafka_chaos.forensics.log_dump import ReplicaLog

MAX_RANGES = 20
MAX_EXAMPLES = 5


@dataclass
class Comparison:
    agree: bool | None  # None: nothing to compare (an empty or unreadable copy)
    first_divergence: dict[str, Any] | None = None
    diverged_offsets: int = 0
    diverged_ranges: list[list[int]] = field(default_factory=list)
    lost_values: int = 0
    uncommitted_offsets: int = 0  # a copy's differing tail above its high watermark

    def as_dict(self) -> dict[str, Any]:
        return {
            "agree": self.agree,
            "first_divergence": self.first_divergence,
            "diverged_offsets": self.diverged_offsets,
            "diverged_ranges": self.diverged_ranges,
            "lost_values": self.lost_values,
            "uncommitted_offsets": self.uncommitted_offsets,
        }


def stored_twice(leader: ReplicaLog, high_watermark: int) -> dict[str, Any] | None:
    """Values the leader holds at more than one committed offset, and who wrote each copy.

    The clients' history shows a duplicate; only the broker's log shows
    whether its producer sent it again under a bumped epoch (an idempotent
    client that gave up on a request and started its sequences over), which
    the broker cannot recognise as a retry.  None when every value is held once.
    """
    offsets: dict[str, list[int]] = {}
    for offset, value in leader.records.items():
        if offset < high_watermark and not value.startswith("marker:"):
            offsets.setdefault(value, []).append(offset)
    twice = sorted((sorted(o), v) for v, o in offsets.items() if len(o) > 1)
    if not twice:
        return None
    bumped, examples = 0, []
    for where, value in twice:
        first, again = leader.batch_at(where[0]), leader.batch_at(where[1])
        bump = bool(
            first
            and again
            and first.producer_id == again.producer_id >= 0
            and again.producer_epoch > first.producer_epoch
        )
        bumped += bump
        if len(examples) < MAX_EXAMPLES:
            examples.append(
                {
                    "value": value,
                    "offsets": where,
                    "producer_ids": [b.producer_id if b else None for b in (first, again)],
                    "producer_epochs": [b.producer_epoch if b else None for b in (first, again)],
                    "epoch_bump": bump,
                }
            )
    return {"values": len(twice), "epoch_bump": bumped, "examples": examples}


def compare_live(replica: ReplicaLog, leader: ReplicaLog, high_watermark: int) -> Comparison:
    """A follower against the leader on [common log start, high watermark)."""
    starts = [s for s in (replica.log_start, leader.log_start) if s is not None]
    if not starts:
        return Comparison(agree=None if high_watermark > 0 else True)
    offsets = range(max(starts), high_watermark)
    return _compare(offsets, replica, leader, held_now=set())


def compare_follower(
    replica: ReplicaLog, leader: ReplicaLog, high_watermark: int, in_isr: bool
) -> dict[str, Any]:
    """A live follower, as replicas.json records it.

    Kafka promises agreement below the high watermark only of the in-sync
    replicas.  A follower outside the ISR (it timed out catching up, or a
    deposed leader not yet truncated) is compared below its own log end, its
    missing tail is counted as ``lagging_offsets``, and a difference is not
    yet a broken promise, so ``agree`` is then None (undecided), never False.
    """
    if in_isr:
        return {**compare_live(replica, leader, high_watermark).as_dict(), "in_isr": True}
    bound = min(high_watermark, replica.log_end or 0)
    result = compare_live(replica, leader, bound).as_dict()
    result.update(in_isr=False, lagging_offsets=high_watermark - bound)
    if result["agree"] is False:
        result["agree"] = None
        result["unreconciled"] = True  # differs, but its broker has not caught up yet
    return result


def compare_before_rejoin(
    copy: ReplicaLog, leader: ReplicaLog, held_now: set[str], committed: int | None
) -> Comparison:
    """A killed leader's log as it was before it rejoined, against the leader's now.

    ``committed`` is the high watermark the copy's broker had checkpointed
    (None: unknown, and then every offset counts, the tail beyond the
    leader's log end included).
    """
    if not copy.records:
        return Comparison(agree=None)
    start = leader.log_start or 0
    bound = committed if committed is not None else (copy.log_end or 0)
    offsets = sorted(o for o in copy.records if start <= o < bound)
    result = _compare(offsets, copy, leader, held_now)
    result.uncommitted_offsets = sum(
        1 for o, v in copy.records.items() if o >= bound and leader.records.get(o) != v
    )
    return result


def _compare(
    offsets: Iterable[int], here: ReplicaLog, leader: ReplicaLog, held_now: set[str]
) -> Comparison:
    diverged: list[int] = []
    lost = 0
    first = None
    for offset in offsets:
        mine, theirs = here.records.get(offset), leader.records.get(offset)
        if mine == theirs:
            continue
        diverged.append(offset)
        if first is None:
            first = {"offset": offset, "here": mine, "leader": theirs}
        if mine is not None and mine not in held_now:
            lost += 1
    return Comparison(
        agree=not diverged,
        first_divergence=first,
        diverged_offsets=len(diverged),
        diverged_ranges=ranges(diverged)[:MAX_RANGES],
        lost_values=lost,
    )


def ranges(offsets: list[int]) -> list[list[int]]:
    """Sorted offsets as inclusive [first, last] runs of consecutive offsets."""
    out: list[list[int]] = []
    for o in sorted(offsets):
        if out and o == out[-1][1] + 1:
            out[-1][1] = o
        else:
            out.append([o, o])
    return out
