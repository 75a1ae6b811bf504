"""Generated two-cluster histories, valid or with one mirror anomaly injected.

One history is a disaster-recovery run in miniature: values sent to dc1 and
read by a group there up to a cut per partition; MirrorMaker's copy of each
partition on dc2 (all of it, or stopping past its recorded progress); a
failover that starts the group on dc2 at a translated offset at or below
where it stopped on dc1 (so some values are read twice, as MirrorMaker's
rounding down makes them); values the producers send to dc2 afterwards;
both final drains and the catch-up line.  Every history carries the legal
look-alikes of the anomalies: values past MirrorMaker's progress that are
not on dc2 (not lost), copies past the group's reach that it did not read
(not skipped), dc2's own values the group did not read (not copies).

Names are per history (``t<hid>``, ``g<hid>``, values ``hid*100000+k``), so
many share one file and one Spark job.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from testkit.builder import HistoryBuilder

KINDS = (
    "valid",
    "mirror-lost",
    "failover-skip",
    "mirror-partition",
    "mirror-order",
    "mirror-duplicate",
)
# What each injection must make the checks find (failover-reread, legal,
# is in nearly every history and compared between Spark and the twin only).
EXPECTED: dict[str, dict[str, int]] = {
    "valid": {},
    "mirror-lost": {"mirror-lost": 1},
    "failover-skip": {"failover-skip": 1},
    "mirror-partition": {"mirror-partition": 1},
    "mirror-order": {"mirror-order": 1},
    "mirror-duplicate": {"mirror-duplicate": 1},
}
VALUES_PER_HISTORY = 100_000
DC2 = "dc2/"


@dataclass
class Copy:
    value: int
    partition: int  # on dc2
    offset: int  # on dc2
    dc1_offset: int


@dataclass
class MirrorHistory:
    hid: int
    rng: random.Random
    b: HistoryBuilder = field(default_factory=HistoryBuilder)
    partitions: int = 2
    skipped: int | None = None  # failover-skip's value: the group on dc2 reads past it
    # Which acks carry no offset: drawn apart, so the histories are the same otherwise.
    unplaced: random.Random = field(default_factory=random.Random)

    @property
    def topic(self) -> str:
        return f"t{self.hid}"

    @property
    def group(self) -> str:
        return f"g{self.hid}"

    def process(self, k: int) -> int:
        return self.hid * 100 + k

    def value(self, k: int) -> int:
        return self.hid * VALUES_PER_HISTORY + k


def generate(hid: int, kind: str, seed: int) -> MirrorHistory:
    h = MirrorHistory(hid, random.Random(seed), unplaced=random.Random(~seed))
    rng, b = h.rng, h.b
    producer, member, member2, drain1, drain2 = (h.process(k) for k in range(5))
    b.subscribe(member, h.group, [h.topic])
    dc1: dict[int, list[int]] = {p: [] for p in range(h.partitions)}
    n = rng.randint(6, 14) * h.partitions
    for k in range(n):
        p = k % h.partitions
        b.send(producer, h.value(k), partition=p, offset=_acked_at(h, len(dc1[p])), topic=h.topic)
        dc1[p].append(h.value(k))
    # The group's reads on dc1, up to a cut per partition.
    cut = {p: rng.randint(0, len(vs)) for p, vs in dc1.items()}
    for p, vs in dc1.items():
        if cut[p]:
            b.poll(member, [(h.topic, p, o, v) for o, v in enumerate(vs[: cut[p]])])
    b.op(member, "info", "leave", {"group": h.group})
    b.fault("failover", 900, "start", [])
    # MirrorMaker's copy: its recorded progress, and how far it really got.
    progress = {p: rng.randint(-1, len(vs) - 1) for p, vs in dc1.items()}
    copied_to = {p: rng.randint(progress[p] + 1, len(vs)) for p, vs in dc1.items()}
    copies = {
        p: [Copy(v, p, o, o) for o, v in enumerate(vs[: copied_to[p]])] for p, vs in dc1.items()
    }
    start = {p: rng.randint(0, min(cut[p], copied_to[p])) for p in dc1}  # rounded down
    b.fault("failover", 900, "end", [], groups={
        f"{DC2}{h.group}": [[DC2 + h.topic, p, s, cut[p]] for p, s in start.items()]
    })  # fmt: skip
    _inject(h, kind, copies, cut, start, progress)
    # The group on dc2, from the translated offset to a reach per partition.
    b.subscribe(member2, DC2 + h.group, [DC2 + h.topic])
    reach = {p: rng.randint(min(start[p], len(cs)), len(cs)) for p, cs in copies.items()}
    skipped = h.skipped
    if skipped is not None:
        p = next(p for p, cs in copies.items() if any(c.value == skipped for c in cs))
        reach[p] = len(copies[p])  # the group reads past the skipped copy
    for p, cs in copies.items():
        read = [c for c in cs if start[p] <= c.offset < reach[p] and c.value != skipped]
        if read:
            b.poll(member2, [(DC2 + h.topic, p, c.offset, c.value) for c in read])
    # dc2's own writes after the failover: not copies, some never read.
    for k in range(n, n + rng.randint(0, 4)):
        p = k % h.partitions
        at = max((c.offset for c in copies[p]), default=-1) + 1
        b.send(producer, h.value(k), partition=p, offset=_acked_at(h, at), topic=DC2 + h.topic)
        copies[p].append(Copy(h.value(k), p, at, -1))
    b.op("nemesis", "info", "mirror-caught-up", {
        "caught_up": True, "waited_s": 1.0, "behind": [],
        "copied": [[h.topic, p, o] for p, o in progress.items() if o >= 0],
    })  # fmt: skip
    b.poll(drain1, [(h.topic, p, o, v) for p, vs in dc1.items() for o, v in enumerate(vs)], True)
    b.poll(drain2, [(DC2 + h.topic, c.partition, c.offset, c.value)
                    for cs in copies.values() for c in cs], True)  # fmt: skip
    return h


def _acked_at(h: MirrorHistory, offset: int) -> int | None:
    """The offset an ack reports: None for about one in ten, as the recorder writes a
    batch the broker answered DUPLICATE_SEQUENCE_NUMBER (workloads/delivery_offsets.py);
    the checks place values by the drains, so no finding may change."""
    return None if h.unplaced.random() < 0.1 else offset


def _inject(
    h: MirrorHistory,
    kind: str,
    copies: dict[int, list[Copy]],
    cut: dict[int, int],
    start: dict[int, int],
    progress: dict[int, int],
) -> None:
    """Change ``copies`` (dc2's log) or mark a value the group on dc2 skips."""
    rng = h.rng
    if kind == "mirror-lost":
        p = _pick(rng, [p for p in copies if progress[p] >= 0], copies)
        gone = rng.randint(0, progress[p])
        copies[p] = [c for c in copies[p] if c.dc1_offset != gone]
    elif kind == "failover-skip":
        # A copy the group never read on dc1, at or after the translated start:
        # the group on dc2 reads past it, but not it.
        p = _pick(rng, [p for p in copies if len(copies[p]) > max(cut[p], start[p]) + 1], copies)
        c = copies[p][rng.randint(max(cut[p], start[p]), len(copies[p]) - 2)]
        h.skipped = c.value
    elif kind == "mirror-partition":
        # A copy appended to the other partition of dc2: after every copy there, so
        # it breaks no order there, and the gap it leaves breaks none either.
        p = _pick(rng, [p for p in copies if copies[p]], copies)
        q = (p + 1) % h.partitions
        c = copies[p].pop(rng.randrange(len(copies[p])))
        c.partition, c.offset = q, max((x.offset for x in copies[q]), default=-1) + 1
        copies[q].append(c)
    elif kind == "mirror-order":
        # Two copies the group read on dc1 before the translated start: the
        # swap breaks order and nothing else.
        p = _pick(rng, [p for p in copies if start[p] >= 2], copies)
        i = rng.randint(0, start[p] - 2)
        a, b = copies[p][i], copies[p][i + 1]
        a.offset, b.offset = b.offset, a.offset
    elif kind == "mirror-duplicate":
        p = _pick(rng, [p for p in copies if copies[p]], copies)
        c = rng.choice(copies[p])
        copies[p].append(Copy(c.value, p, len(copies[p]), c.dc1_offset))


def _pick(rng: random.Random, candidates: list[int], copies: dict[int, list[Copy]]) -> int:
    if not candidates:
        raise _Unfit
    return rng.choice(sorted(candidates))


class _Unfit(Exception):
    """The drawn history has no room for the injection; draw another."""


def generate_fit(hid: int, kind: str, seed: int, tries: int = 50) -> MirrorHistory:
    """``generate`` with the first of ``seed``, ``seed+1``... that fits the injection."""
    for k in range(tries):
        try:
            return generate(hid, kind, seed + k)
        except _Unfit:
            continue
    raise AssertionError(f"no history with room for {kind} in {tries} tries from seed {seed}")


def ops(h: MirrorHistory) -> list[dict[str, Any]]:
    return h.b.ops
