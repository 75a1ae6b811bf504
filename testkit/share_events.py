"""What a share-group history says happened, as plain records (docs/history.md, "Share groups").

Deliveries, acknowledgements with their outcome, crashes and share drains,
extracted once from the history lines.  The reference twin
(testkit/reference_share.py) judges these; the Spark checks
(checkers/share/share_checks.py) derive the same tables in Spark.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

Record = tuple[str, int, int]  # topic, partition, offset


@dataclass(frozen=True)
class Delivery:
    group: str
    process: int
    record: Record
    value: int | None
    count: int
    invoke_time: int  # the share-poll's invoke: the earliest the record can have been acquired
    time: int  # the share-poll's completion: the member holds the record from here
    index: int


@dataclass(frozen=True)
class Ack:
    group: str
    process: int
    record: Record
    value: int | None
    type: str  # accept | release | reject
    outcome: str  # committed | unknown | refused
    invoke_time: int
    time: int | None  # completion (None: never completed)
    invoke_index: int
    index: int | None


@dataclass
class ShareEvents:
    deliveries: list[Delivery] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    crashes: dict[int, int] = field(default_factory=dict)  # process -> time
    sends: dict[int, dict[str, Any]] = field(default_factory=dict)  # value -> send ok line
    groups: dict[str, dict[str, int]] = field(default_factory=dict)  # lock_ms, delivery_limit
    drains: dict[str, bool] = field(default_factory=dict)  # group -> complete
    faults: list[dict[str, Any]] = field(default_factory=list)  # the nemesis's lines


def _record(r: dict[str, Any]) -> Record:
    return (r["topic"], r["partition"], r["offset"])


def share_events(ops: Iterable[dict[str, Any]]) -> ShareEvents:
    """One pass over the history's lines, in file order."""
    ev = ShareEvents()
    poll_invoked: dict[Any, int] = {}
    pending_acks: dict[Any, dict[str, Any]] = {}
    for op in ops:
        f, t, v, p = op["f"], op["type"], op.get("value") or {}, op["process"]
        if f == "send" and t == "ok":
            ev.sends[v["value"]] = op
        elif f == "share-subscribe" and t == "ok":
            ev.groups[v["group"]] = {
                "lock_ms": v["lock_ms"],
                "delivery_limit": v["delivery_limit"],
                "topics": v["topics"],
            }
        elif f == "share-poll" and t == "invoke":
            poll_invoked[p] = op["time"]
        elif f == "share-poll" and t == "ok":
            for r in v.get("records", []):
                ev.deliveries.append(
                    Delivery(
                        v["group"], p, _record(r), r.get("value"), r["delivery_count"],
                        poll_invoked.get(p, op["time"]), op["time"], op["index"],
                    )
                )  # fmt: skip
        elif f == "share-ack" and t == "invoke":
            pending_acks[p] = op
        elif f == "share-ack":
            invoke = pending_acks.pop(p, op)
            failed = {(x["topic"], x["partition"]) for x in v.get("failed", [])}
            for a in v.get("acks", []):
                if t == "fail":
                    outcome = "refused"
                elif t == "ok" and (a["topic"], a["partition"]) not in failed:
                    outcome = "committed"
                else:
                    outcome = "unknown"
                ev.acks.append(
                    Ack(
                        v["group"], p, _record(a), a.get("value"), a["type"], outcome,
                        invoke["time"], op["time"], invoke["index"], op["index"],
                    )
                )  # fmt: skip
        elif f == "crash":
            ev.crashes.setdefault(p, op["time"])
        elif f == "share-drain":
            ev.drains[v["group"]] = bool(v.get("complete"))
        elif p == "nemesis":
            ev.faults.append(op)
    _place_sends(ev)
    for invoke in pending_acks.values():  # never completed: outcome unknown
        v = invoke["value"]
        for a in v.get("acks", []):
            ev.acks.append(
                Ack(
                    v["group"], invoke["process"], _record(a), a.get("value"), a["type"],
                    "unknown", invoke["time"], None, invoke["index"], None,
                )
            )  # fmt: skip
    return ev


def _place_sends(ev: ShareEvents) -> None:
    """A send acknowledged without an offset (a batch answered DUPLICATE_SEQUENCE_NUMBER:
    workloads/delivery_offsets.py) takes the lowest offset any group was delivered its
    value at in its partition, as the Spark checks place it; never delivered, it stays
    at no offset, which no acknowledgement names."""
    seen: dict[tuple[str, int, int], int] = {}
    for d in ev.deliveries:
        if d.value is not None:
            key = (d.record[0], d.record[1], d.value)
            seen[key] = min(d.record[2], seen.get(key, d.record[2]))
    for value, op in ev.sends.items():
        v = op["value"]
        if v.get("offset") is None:
            at = seen.get((v["topic"], v["partition"], value))
            ev.sends[value] = {**op, "value": {**v, "offset": at}}
