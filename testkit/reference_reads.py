"""How the reference twins read a history: the operations a transaction line
stands for, and the reads, acks, delivery reports, groups and known offsets
their definitions are written in terms of.

Shared by the queue reference (``testkit.reference``) and the transactional
one (``testkit.reference_txn``), which the queue reference calls: kept apart
so that neither imports the other back.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

Anomalies = dict[str, list[tuple]]  # a multiset of keys per check


def expand(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``ops`` with each ``txn`` line followed by the operations it stands for.

    Each added operation and the txn line itself carry ``txn``, the index of
    the transaction's invoke (a process has one transaction in flight), and
    a send its micro-op's position ``mop``.  An invoke adds its sends; a
    completion adds its sends with its outcome (a skipped send: ``fail``),
    one ``ok`` poll holding every record its polls returned, and a commit of
    its ``offsets`` with its outcome.  Expanding twice changes nothing.
    """
    out: list[dict[str, Any]] = []
    open_txn: dict[Any, int] = {}
    for op in ops:
        if op["f"] != "txn" or op["process"] == "nemesis" or "txn" in op:
            out.append(op)
            continue
        v, typ, p = op["value"], op["type"], op["process"]
        done = typ != "invoke"
        txn = open_txn.pop(p) if done else op["index"]
        if not done:
            open_txn[p] = txn
        out.append({**op, "txn": txn})
        base = {"index": op["index"], "time": op["time"], "process": p, "txn": txn}
        records, polled = [], False
        for k, m in enumerate(v["ops"]):
            if m["f"] == "send":
                sent = {"topic": m["topic"], "value": m["value"], "partition": m.get("partition")}
                if done:
                    sent.update(offset=m.get("offset"), error=v.get("error"))
                outcome = "fail" if done and m.get("skipped") else typ
                out.append({**base, "type": outcome, "f": "send", "value": sent, "mop": k})
            elif done and not m.get("skipped"):
                polled = True
                records += m["records"]
        if polled:
            value = {"records": records, "rebalanced": v.get("rebalanced", [])}
            out.append({**base, "type": "ok", "f": "poll", "value": value})
        if done and "offsets" in v:
            commit = {"group": v.get("group"), "offsets": v["offsets"]}
            out.append({**base, "type": typ, "f": "commit", "value": commit})
    return out


def aborted_positions(ops: list[dict[str, Any]]) -> set[tuple]:
    """(topic, partition, offset) known (read, or named by a delivery report) to
    hold a value an aborted transaction sent: a read_committed consumer skips
    them (``poll-skip``, ``commit-past-unread``)."""
    aborted = {
        op["value"]["value"]
        for op in ops
        if op["f"] == "send" and op["type"] == "fail" and "txn" in op
    }
    read = {(r["topic"], r["partition"], r["offset"], r["value"]) for _, _, r in reads_of(ops)}
    reported = {(t, p, o, v) for _, t, p, o, v in reports_of(ops)}
    return {(t, p, o) for t, p, o, v in read | reported if v in aborted}


def reads_of(ops: list[dict[str, Any]]):
    """(op, record position, record) for every polled record, in history order."""
    for op in ops:
        if op["f"] == "poll" and op["type"] == "ok":
            for j, r in enumerate(op["value"]["records"]):
                yield op, j, r


def acks_of(ops: list[dict[str, Any]]):
    for op in ops:
        if op["f"] == "send" and op["type"] == "ok":
            v = op["value"]
            off = v.get("offset")
            yield op, v["topic"], v.get("partition"), -1 if off is None else off, v["value"]


def reports_of(ops: list[dict[str, Any]]):
    """(op, topic, partition, offset, value) of every completed send whose delivery
    report named its place: acked, or of an aborted or unknown transaction, whose
    record occupies its offset all the same."""
    for op in ops:
        if op["f"] == "send" and op["type"] != "invoke":
            v = op["value"]
            off = v.get("offset")
            if off is not None and off >= 0 and v.get("partition") is not None:
                yield op, v["topic"], v["partition"], off, v["value"]


def read_places(ops: list[dict[str, Any]]) -> dict[Any, set[tuple]]:
    """value -> every (topic, partition, offset) a poll read it at: where an ack
    without an offset is placed, when that is one place (at two it is a duplicate)."""
    places: dict[Any, set[tuple]] = defaultdict(set)
    for _, _, r in reads_of(ops):
        if r["value"] is not None:
            places[r["value"]].add((r["topic"], r["partition"], r["offset"]))
    return places


def known_offsets(ops: list[dict[str, Any]], read_committed: bool = True) -> tuple[dict, dict]:
    """(every known offset, those a committed reader must read) per partition.

    Known: a delivery report (``reports_of``) or a read names it.  Only an ack
    or a read proves the record there committed (an unknown transaction's
    report may name an aborted one), and read_committed consumers (and the
    final drain, always) may skip aborted data, so the second leaves out
    offsets known to hold an aborted value; in a read_uncommitted run only
    acks prove that an offset is committed.  An ack without an offset proves it
    of the one place its value was read (``QueueTables._committed`` says why).
    """
    known: dict[tuple, set] = defaultdict(set)
    acked: dict[tuple, set] = defaultdict(set)
    read: dict[tuple, set] = defaultdict(set)
    for _, topic, part, off, _ in reports_of(ops):
        known[(topic, part)].add(off)
    places = read_places(ops)
    for _, topic, part, off, val in acks_of(ops):
        if off >= 0:
            acked[(topic, part)].add(off)
        elif len(places[val]) == 1:  # acked without an offset: where it was read
            (topic, part, off), *_ = places[val]
            acked[(topic, part)].add(off)
    for _, _, r in reads_of(ops):
        known[(r["topic"], r["partition"])].add(r["offset"])
        read[(r["topic"], r["partition"])].add(r["offset"])
    committed_known: dict[tuple, set] = defaultdict(set)
    for proof in (acked, read) if read_committed else (acked,):
        for tp, offsets in proof.items():
            committed_known[tp] |= offsets
    for topic, part, off in aborted_positions(ops):
        committed_known[(topic, part)].discard(off)
    return known, committed_known


def groups_of(ops: list[dict[str, Any]]) -> tuple[dict[Any, str], set]:
    """process -> group for consumers in groups, excluding the final drain's processes."""
    drain = {
        op["process"]
        for op in ops
        if op["f"] == "poll" and isinstance(op["value"], dict) and op["value"].get("final")
    }
    group_of: dict[Any, str] = {}
    for op in ops:
        if op["f"] in ("subscribe", "assign") and op["process"] not in drain:
            g = op["value"].get("group")
            if g is not None:
                group_of.setdefault(op["process"], g)
    return group_of, drain


def is_final_poll(op: dict[str, Any]) -> bool:
    return op["f"] == "poll" and isinstance(op["value"], dict) and bool(op["value"].get("final"))
