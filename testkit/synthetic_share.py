"""Generated share-group histories, valid or with one anomaly injected, for property tests.

A history is one share group's life: acknowledged sends, members that poll
records (one to three per poll) and accept, release or reject them, members
that crash holding records or let their lock lapse, redeliveries with rising
delivery counts up to the limit, acknowledgements whose outcome is unknown,
and a share drain at the end.  ``inject`` adds exactly the situation one
check is about.  Many histories can share one file (``Namespace``): each gets
its own group, topic, processes and values, so one Spark job judges them all.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from checkers.builder import HistoryBuilder
from checkers.catalog import names

KINDS = ("valid", "unknown-drain-incomplete", *names("share"))
LOCK_MS = 15000


@dataclass
class Namespace:
    """Names of history ``hid`` inside a shared file."""

    hid: int

    @property
    def group(self) -> str:
        return f"g{self.hid}"

    @property
    def topic(self) -> str:
        return f"t{self.hid}"

    def process(self, k: int) -> int:
        return self.hid * 1000 + k

    def value(self, k: int) -> int:
        return self.hid * 100_000 + k


@dataclass
class ShareHistory:
    b: HistoryBuilder
    ns: Namespace
    rng: random.Random
    limit: int
    members: list[int] = field(default_factory=list)
    next_process: int = 10
    offsets: dict[int, int] = field(default_factory=dict)

    def member(self) -> int:
        p = self.ns.process(self.next_process)
        self.next_process += 1
        v = {"group": self.ns.group, "topics": [self.ns.topic], "lock_ms": LOCK_MS,
             "delivery_limit": self.limit}  # fmt: skip
        self.b.op(p, "invoke", "share-subscribe", v)
        self.b.op(p, "ok", "share-subscribe", v)
        self.members.append(p)
        return p

    def send(self, k: int) -> dict[str, Any]:
        partition = self.rng.randrange(3)
        offset = self.offsets.get(partition, 0)
        self.offsets[partition] = offset + 1
        self.b.send(self.ns.process(1), self.ns.value(k), partition, offset, topic=self.ns.topic)
        return {"topic": self.ns.topic, "partition": partition, "offset": offset,
                "value": self.ns.value(k)}  # fmt: skip

    def deliver(self, p: int, records: list[tuple[dict, int]], final: bool = False) -> None:
        self.b.op(p, "invoke", "share-poll", {"final": True} if final else None)
        value = {"group": self.ns.group, "records": [
            {**r, "key": None, "delivery_count": c} for r, c in records]}  # fmt: skip
        self.b.op(p, "ok", "share-poll", value)

    def ack(self, p: int, acks: list[tuple[dict, str]], outcome: str = "ok") -> None:
        value = {"group": self.ns.group, "acks": [{**r, "type": t} for r, t in acks]}
        self.b.op(p, "invoke", "share-ack", value)
        if outcome == "ok":
            self.b.op(p, "ok", "share-ack", {**value, "failed": []})
        elif outcome == "failed-partition":
            failed = [{"topic": r["topic"], "partition": r["partition"], "error": "TIMED_OUT"}
                      for r, _ in acks]  # fmt: skip
            self.b.op(p, "ok", "share-ack", {**value, "failed": failed})
        else:
            self.b.op(p, "info", "share-ack", {**value, "error": "timed out"})

    def crash(self, p: int) -> None:
        self.b.op(p, "info", "crash", {"reason": "test"})
        self.members.remove(p)
        self.member()

    def lifecycle(self, record: dict) -> None:
        """Deliver one record until it is accepted, rejected or archived at the limit."""
        count = 1
        while True:
            p = self.rng.choice(self.members)
            self.deliver(p, [(record, count)])
            fate = self.rng.choices(
                ["accept", "reject", "release", "crash", "lapse", "unknown"],
                weights=[60, 6, 12, 5, 5, 4],
            )[0]
            if fate in ("accept", "reject"):
                self.ack(p, [(record, fate)])
                return
            if fate == "unknown":  # an accept whose outcome nobody knows: never redelivered
                self.ack(p, [(record, "accept")], self.rng.choice(["failed-partition", "info"]))
                return
            if fate == "release":
                self.ack(p, [(record, "release")])
            elif fate == "crash":
                self.crash(p)
            else:
                self.b.advance(LOCK_MS / 1000)  # the lock lapses without an ack
            if count >= self.limit:
                return  # archived
            self.b.advance(0.2)
            count += 1


def generate(hid: int, kind: str, seed: int) -> HistoryBuilder:
    """One history of ``kind`` (KINDS) in namespace ``hid``."""
    rng = random.Random(seed)
    b = HistoryBuilder(step_ms=5)
    h = ShareHistory(b, Namespace(hid), rng, limit=rng.randint(2, 5))
    for _ in range(rng.randint(2, 3)):
        h.member()
    records = [h.send(k) for k in range(rng.randint(5, 25))]
    for r in records:
        h.lifecycle(r)
    inject(h, kind, records)
    final_drain(h)
    b.op(h.ns.process(999), "ok", "share-drain",
         {"group": h.ns.group, "final": True, "complete": kind != "unknown-drain-incomplete",
          "quiet_s": LOCK_MS / 1000 + 3, "delivered": 0})  # fmt: skip
    return b


def final_drain(h: ShareHistory) -> None:
    """The plain consumer's final drain every run ends with: the whole log, complete."""
    drainer = h.ns.process(998)
    sent = [op["value"] for op in h.b.ops if op["f"] == "send" and op["type"] == "ok"]
    parts = sorted(h.offsets)
    h.b.assign(drainer, None, [(h.ns.topic, p) for p in parts])
    h.b.poll(drainer, [(v["topic"], v["partition"], v["offset"], v["value"]) for v in sent], True)
    for p in parts:
        h.b.drain_bounds(drainer, h.ns.topic, p, 0, h.offsets[p])


def inject(h: ShareHistory, kind: str, records: list[dict]) -> None:
    """Add the situation one check is about, after the normal traffic."""
    p, q = h.members[0], h.members[-1] if len(h.members) > 1 else h.member()
    fresh = lambda k: h.send(900 + k)  # noqa: E731 - values no lifecycle touched
    if kind == "share-lost":
        fresh(0)  # acknowledged, never delivered, never accepted
    elif kind == "share-double-acquire":
        r = fresh(1)
        h.deliver(p, [(r, 1)])
        if h.rng.random() < 0.5:
            h.deliver(q, [(r, 1)])  # the same acquisition handed out twice
        else:
            h.b.advance(LOCK_MS / 1000)  # p's lock lapsed and q got the record...
            h.deliver(q, [(r, 2)])
            h.ack(p, [(r, "release")])  # ...yet p's late acknowledgement was applied
        h.ack(q, [(r, "accept")])
    elif kind in ("share-redelivered-after-accept", "share-redelivered-after-reject"):
        r = fresh(2)
        final = kind.rsplit("-", 1)[1]
        h.deliver(p, [(r, 1)])
        h.ack(p, [(r, final)])
        h.b.advance(1)
        h.deliver(q, [(r, 2)])
        h.ack(q, [(r, "accept")])
    elif kind == "share-delivery-count":
        r = fresh(3)
        h.deliver(p, [(r, 2)])
        h.ack(p, [(r, "release")])
        h.b.advance(1)
        h.deliver(q, [(r, 1)])  # the count went backwards
        h.ack(q, [(r, "accept")])
    elif kind == "share-delivery-count-stalled":
        r = fresh(5)
        h.deliver(p, [(r, 1)])
        h.ack(p, [(r, "accept")], "failed-partition")  # the leader died under the ack
        h.b.advance(5)
        h.deliver(p, [(r, 1)])  # the new leader hands it out again, uncounted
        h.ack(p, [(r, "accept")])
    elif kind == "share-missing-redelivery":
        r = fresh(4)
        h.deliver(p, [(r, 1)])
        h.ack(p, [(r, "release")])  # below any limit (>= 2), and never delivered again
