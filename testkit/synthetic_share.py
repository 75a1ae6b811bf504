"""Generated share-group histories, valid or with one anomaly injected, for property tests.

A history is one share group's life: acknowledged sends, members that poll
records (one to three per poll) and accept, release or reject them, members
that crash holding records or let their lock lapse, redeliveries with rising
delivery counts up to the limit, acknowledgements whose outcome is unknown,
and a share drain at the end.  ``inject`` adds exactly the situation one
check is about.  Many histories can share one file (``Namespace``): each gets
its own group, topic, processes, values and broker ids, so one Spark job
judges them all.

Share-partition leader changes come in one of three modes per history: none;
sampled (cluster-state rows, ``ShareBuilder.samples``, one a second on the
history's clock, plus kills of nodes that lead some other partition); or
faults alone (kill lines, no samples, so every fault is a possible change).
The allowed shapes appear across a change (``share-redelivered-after-leader-
change``, never an error); violations are injected within one tenure, with
changes elsewhere that must not excuse them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from kafka_chaos.checkers.catalog import names
from kafka_chaos.checkers.share.share_checks import LEADER_CHANGE

from testkit.builder import HistoryBuilder

KINDS = ("valid", "unknown-drain-incomplete", *names("share"))
LOCK_MS = 15000
PARTITIONS = 3
MODES = ("none", "samples", "faults")


class ShareBuilder(HistoryBuilder):
    """A history and the cluster-state samples taken beside it."""

    def __init__(self, step_ms: float = 1.0) -> None:
        super().__init__(step_ms)
        self.samples: list[dict[str, Any]] = []


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

    def node(self, k: int) -> int:
        """Broker id of node k (1..3): every history has brokers of its own."""
        return self.hid * 10 + k


@dataclass
class ShareHistory:
    b: ShareBuilder
    ns: Namespace
    rng: random.Random
    limit: int
    mode: str = "none"
    members: list[int] = field(default_factory=list)
    next_process: int = 10
    offsets: dict[int, int] = field(default_factory=dict)
    # partition -> [(time ns, leader broker id)], the leadership the samples show
    leaders: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    faults: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)  # every record, at its offset
    # Which acks carry no offset (``send``): drawn apart, so the histories are otherwise
    # the same as without.
    unplaced: random.Random = field(default_factory=random.Random)

    def leader(self, partition: int) -> int:
        """Who leads ``partition`` now (initially node 1, 2, 3 in turn)."""
        history = self.leaders.get(partition)
        return history[-1][1] if history else self.ns.node(partition % 3 + 1)

    def kill(self, k: int, seconds: float = 4.0) -> None:
        """A kill of node k (1..3), restarted ``seconds`` later."""
        name = f"n{self.ns.node(k)}"
        self.faults += 1
        self.b.fault("kill", self.faults, "start", [name])
        self.b.advance(seconds)
        self.b.fault("kill", self.faults, "end", [name])

    def change_leader(self, partition: int) -> None:
        """Leadership of ``partition`` moves now: a new sampled leader (the old one
        killed, in sampled mode too), or a kill line alone without samples."""
        old = self.leader(partition)
        k = old - self.ns.node(0)
        if self.mode == "samples":
            new = self.ns.node(k % 3 + 1)
            if self.rng.random() < 0.5:  # killed: the samples show the move 2 s later
                self.faults += 1
                name = f"n{old}"
                self.b.fault("kill", self.faults, "start", [name])
                self.b.advance(2)
                self.leaders.setdefault(partition, []).append((self.b.time_ns, new))
                self.b.advance(1)
                self.b.fault("kill", self.faults, "end", [name])
            else:  # a clean move: the samples alone show it
                self.leaders.setdefault(partition, []).append((self.b.time_ns, new))
                self.b.advance(3)
        else:
            self.kill(k)

    def unrelated_changes(self, partition: int) -> None:
        """Changes that must excuse nothing about ``partition``: another partition's
        leader moves, and a node that leads neither it nor was sampled leading it dies."""
        if self.mode != "samples":
            return
        other = (partition + 1) % PARTITIONS
        self.leaders.setdefault(other, []).append(
            (self.b.time_ns, self.ns.node((self.leader(other) - self.ns.node(0)) % 3 + 1))
        )
        ever = {self.leader(partition), *(n for _, n in self.leaders.get(partition, []))}
        spare = [k for k in (1, 2, 3) if self.ns.node(k) not in ever]
        if spare:
            self.kill(spare[0], 0.5)

    def sample(self) -> None:
        """Cluster-state rows once a second from 0 to 3 s past the last line."""
        if self.mode != "samples":
            return
        end = self.b.time_ns + 3_000_000_000
        for t in range(0, end, 1_000_000_000):
            parts = []
            for p in range(PARTITIONS):
                leader = self.ns.node(p % 3 + 1)
                for at, who in self.leaders.get(p, []):
                    if at <= t:
                        leader = who
                parts.append({"topic": self.ns.topic, "partition": p, "leader": leader,
                              "replicas": [], "isr": []})  # fmt: skip
            self.b.samples.append({"time": t, "controller": None, "partitions": parts,
                                   "error": None})  # fmt: skip

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
        # About one ack in ten without an offset, as the recorder writes a batch the broker
        # answered DUPLICATE_SEQUENCE_NUMBER (workloads/delivery_offsets.py).
        acked_at = None if self.unplaced.random() < 0.1 else offset
        self.b.send(self.ns.process(1), self.ns.value(k), partition, acked_at, topic=self.ns.topic)
        record = {"topic": self.ns.topic, "partition": partition, "offset": offset,
                  "value": self.ns.value(k)}  # fmt: skip
        self.sent.append(record)
        return record

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


def generate(hid: int, kind: str, seed: int) -> ShareBuilder:
    """One history of ``kind`` (KINDS) in namespace ``hid``, with its samples."""
    rng = random.Random(seed)
    b = ShareBuilder(step_ms=5)
    h = ShareHistory(b, Namespace(hid), rng, limit=rng.randint(2, 5), mode=rng.choice(MODES),
                     unplaced=random.Random(~seed))  # fmt: skip
    for _ in range(rng.randint(2, 3)):
        h.member()
    records = [h.send(k) for k in range(rng.randint(5, 25))]
    for r in records:
        h.lifecycle(r)
    inject(h, kind, records)
    if h.mode == "faults" and kind != LEADER_CHANGE:
        h.kill(rng.randint(1, 3))  # after every delivery: it must excuse nothing before it
    final_drain(h)
    b.op(h.ns.process(999), "ok", "share-drain",
         {"group": h.ns.group, "final": True, "complete": kind != "unknown-drain-incomplete",
          "quiet_s": LOCK_MS / 1000 + 3, "delivered": 0})  # fmt: skip
    h.sample()
    return b


def final_drain(h: ShareHistory) -> None:
    """The plain consumer's final drain every run ends with: the whole log, complete."""
    drainer = h.ns.process(998)
    parts = sorted(h.offsets)
    h.b.assign(drainer, None, [(h.ns.topic, p) for p in parts])
    h.b.poll(drainer, [(v["topic"], v["partition"], v["offset"], v["value"]) for v in h.sent], True)
    for p in parts:
        h.b.drain_bounds(drainer, h.ns.topic, p, 0, h.offsets[p])


def inject(h: ShareHistory, kind: str, records: list[dict]) -> None:
    """Add the situation one check is about, after the normal traffic."""
    p, q = h.members[0], h.members[-1] if len(h.members) > 1 else h.member()
    fresh = lambda k: h.send(900 + k)  # noqa: E731 - values no lifecycle touched
    h.b.advance(3)  # past the unsampled first second of a short history
    if kind == "valid" and h.rng.random() < 0.5:
        # legal: the client presents its unacknowledged record again within its lock
        r = fresh(6)
        h.deliver(p, [(r, 1)])
        h.ack(p, [(r, "accept")], "failed-partition")
        h.b.advance(2)
        h.deliver(p, [(r, 1)])
        h.ack(p, [(r, "accept")])
    if kind == "share-lost":
        fresh(0)  # acknowledged, never delivered, never accepted
    elif kind == "share-double-acquire":
        r = fresh(1)
        h.deliver(p, [(r, 1)])
        if h.rng.random() < 0.5:
            h.unrelated_changes(r["partition"])
            h.deliver(q, [(r, 1)])  # the same acquisition handed out twice
        else:
            h.b.advance(LOCK_MS / 1000)  # p's lock lapsed and q got the record...
            if h.mode != "none":
                h.change_leader(r["partition"])  # (a new leader would refuse p's ack too)
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
        h.unrelated_changes(r["partition"])
        h.b.advance(1)
        h.deliver(q, [(r, 1)])  # the count went backwards within one tenure
        h.ack(q, [(r, "accept")])
    elif kind == "share-delivery-count-stalled":
        r = fresh(5)
        h.deliver(p, [(r, 1)])
        if h.rng.random() < 0.5:
            h.ack(p, [(r, "release")])  # the hold ended with a committed release...
            h.b.advance(1)
        else:
            h.ack(p, [(r, "accept")], "failed-partition")
            h.b.advance(LOCK_MS / 1000 + 1)  # ...or its lock expired
        h.unrelated_changes(r["partition"])
        h.deliver(p, [(r, 1)])  # a new acquisition by the same leader, uncounted
        h.ack(p, [(r, "accept")])
    elif kind == LEADER_CHANGE:
        # the shapes KIP-932 allows once the share-partition leader changed
        r = fresh(7)  # to another member with the same count
        h.deliver(p, [(r, 1)])
        h.change_leader(r["partition"])
        h.deliver(q, [(r, 1)])
        h.ack(q, [(r, "accept")])
        r = fresh(8)  # to the same member with the same count, after its lock's time
        h.deliver(p, [(r, 1)])
        h.change_leader(r["partition"])
        h.b.advance(LOCK_MS / 1000 + 1)
        h.deliver(p, [(r, 1)])
        h.ack(p, [(r, "accept")])
        r = fresh(9)  # with a lower count
        h.deliver(p, [(r, 2)])
        h.change_leader(r["partition"])
        h.deliver(q, [(r, 1)])
        h.ack(q, [(r, "accept")])
    elif kind == "share-missing-redelivery":
        r = fresh(4)
        h.deliver(p, [(r, 1)])
        h.ack(p, [(r, "release")])  # below any limit (>= 2), and never delivered again
