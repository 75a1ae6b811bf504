"""Shared by the transactional property tests: a judged case and the edits
that turn a generated history into a mutated one."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, seed, settings

from testkit.reference_txn import completions
from testkit.synthetic_txn import histories


@dataclass
class Case:
    kind: str  # valid | lost | no-seek | aborted-read
    ops: list[dict[str, Any]]
    config: dict[str, Any]
    source: int  # seed of the generated history
    value: int | None = None  # the value a mutation is about
    want: tuple | None = None  # the key of the anomaly a mutation injects


def read_committed(config: dict[str, Any], committed: bool) -> dict[str, Any]:
    level = "read_committed" if committed else "read_uncommitted"
    return {**config, "txn": {**config["txn"], "isolation_level": level}}


def renumbered(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**op, "index": i} for i, op in enumerate(ops)]


def with_records(op: dict[str, Any], keep) -> dict[str, Any]:
    """``op`` with only the records ``keep`` accepts, in poll lines and txn polls."""
    v = op["value"]
    if op["f"] == "poll" and op["type"] == "ok":
        return {**op, "value": {**v, "records": [r for r in v["records"] if keep(r)]}}
    if op["f"] == "txn" and op["type"] != "invoke":
        mops = [
            {**m, "records": [r for r in m["records"] if keep(r)]} if "records" in m else m
            for m in v["ops"]
        ]
        return {**op, "value": {**v, "ops": mops}}
    return op


def committed_sends(ops: list[dict[str, Any]]) -> list[int]:
    return [
        m["value"]
        for op in ops
        if op["f"] == "txn" and op["type"] == "ok"
        for m in op["value"]["ops"]
        if m["f"] == "send"
    ]


def aborted_sends(ops: list[dict[str, Any]]) -> list[tuple[str, int, int, int]]:
    return [
        (m["topic"], m["partition"], m["offset"], m["value"])
        for op in ops
        if op["f"] == "txn" and op["type"] == "fail"
        for m in op["value"]["ops"]
        if m["f"] == "send" and m.get("offset") is not None
    ]


def drain_read(ops: list[dict[str, Any]], record: tuple[str, int, int, int]) -> list[dict]:
    """``ops`` with the final drain reading ``record`` in offset order."""
    topic, partition, offset, value = record
    r = {"topic": topic, "partition": partition, "offset": offset, "key": str(value),
         "value": value}  # fmt: skip
    drains = [
        i
        for i, op in enumerate(ops)
        if op["f"] == "poll" and op["type"] == "ok" and op["value"].get("final")
        and any(x["partition"] == partition and x["topic"] == topic for x in op["value"]["records"])
    ]  # fmt: skip
    out = list(ops)
    for i in drains:
        records = out[i]["value"]["records"]
        if records[-1]["offset"] > offset or i == drains[-1]:
            at = next((k for k, x in enumerate(records) if x["offset"] > offset), len(records))
            value_ = {**out[i]["value"], "records": [*records[:at], r, *records[at:]]}
            out[i] = {**out[i], "value": value_}
            return out
    return out


def inject_backward_read(ops: list[dict], rnd: random.Random) -> list[dict]:
    """One committed transaction's poll returns a value a later committed one sent."""
    lines = [(txn, line) for txn, line in completions(ops) if line["type"] == "ok"]
    readers = [
        (i, txn, line)
        for i, (txn, line) in enumerate(lines)
        if any(m["f"] == "poll" and not m.get("skipped") for m in line["value"]["ops"])
    ]
    sent = [
        (txn, m)
        for txn, line in lines
        for m in line["value"]["ops"]
        if m["f"] == "send" and not m.get("skipped") and m.get("offset") is not None
    ]
    pairs = [(r, s) for r in readers for s in sent if s[0] > r[1]]
    if not pairs:
        return ops
    (_, _, line), (_, m) = rnd.choice(pairs)
    record = {k: m[k] for k in ("topic", "partition", "offset")}
    record.update(key=str(m["value"]), value=m["value"])
    mops = list(line["value"]["ops"])
    k = next(k for k, x in enumerate(mops) if x["f"] == "poll" and not x.get("skipped"))
    mops[k] = {**mops[k], "records": [*mops[k]["records"], record]}
    out = list(ops)
    at = next(i for i, op in enumerate(ops) if op is line)
    out[at] = {**line, "value": {**line["value"], "ops": mops}}
    return out


def inject_mutual_read(ops: list[dict], rnd: random.Random) -> list[dict]:
    """Two committed transactions each poll a value the other sent: a cycle of wr
    edges alone (G1c without ww edges, so G1c-wr with them)."""
    lines = [
        line
        for _, line in completions(ops)
        if line["type"] == "ok"
        and any(m["f"] == "poll" and not m.get("skipped") for m in line["value"]["ops"])
        and any(
            m["f"] == "send" and not m.get("skipped") and m.get("offset") is not None
            for m in line["value"]["ops"]
        )
    ]
    if len(lines) < 2:
        return ops
    a, b = rnd.sample(lines, 2)
    out = list(ops)
    for reader, writer in ((a, b), (b, a)):
        m = rnd.choice(
            [
                m
                for m in writer["value"]["ops"]
                if m["f"] == "send" and not m.get("skipped") and m.get("offset") is not None
            ]
        )
        record = {k: m[k] for k in ("topic", "partition", "offset")}
        record.update(key=str(m["value"]), value=m["value"])
        mops = list(reader["value"]["ops"])
        k = next(k for k, x in enumerate(mops) if x["f"] == "poll" and not x.get("skipped"))
        mops[k] = {**mops[k], "records": [*mops[k]["records"], record]}
        at = next(i for i, op in enumerate(ops) if op is reader)
        out[at] = {**reader, "value": {**reader["value"], "ops": mops}}
    return out


def over_generated_histories(rng_seed: int, examples: int, max_txns: int) -> Callable:
    """The property tests' decorator: ``examples`` generated transactional histories
    (argument ``h``), reproducible from ``rng_seed``, never timed."""

    def wrap(test: Callable) -> Callable:
        test = given(h=histories(max_txns=max_txns))(test)
        test = settings(
            max_examples=examples,
            deadline=None,
            print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )(test)
        return seed(rng_seed)(test)

    return wrap


def analyse_cases(spark, tmp_path, cases: list[Case], config: dict[str, Any]) -> dict:
    """Every case judged by the Spark checkers in one job (hid = position in
    ``cases``), without the cycle search, which has tests of its own."""
    from kafka_chaos.checkers.api import analyse
    from kafka_chaos.checkers.ingest.load import load_history

    from testkit.builder import write_histories

    path = write_histories(tmp_path / "many.jsonl", (case.ops for case in cases))
    ops = load_history(spark, path)
    return analyse(spark, ops, config, examples=None, stats=False, cycles=False)


@dataclass
class SeekRead:
    """A seek's entry for one partition and the next read of it by the same
    process, with no reset in between (as ``reference.poll_anomalies`` pairs them)."""

    line: int  # the seek line's index
    entry: int  # the entry's position in its ``offsets``
    stream: tuple  # (process, topic, partition)
    offset: int  # where the seek put the position
    read: int  # the offset the next read returned


def seek_reads(ops: list[dict[str, Any]]) -> list[SeekRead]:
    """Every seek entry (to an offset >= 0) that a read of its partition by its
    process follows before any reset, with that read's offset."""
    from testkit.reference import expand

    pending: dict[tuple, tuple[int, int, int]] = {}
    out = []
    for op in expand(ops):
        p, v = op["process"], op["value"]
        if op["f"] in ("subscribe", "assign"):
            pending = {s: e for s, e in pending.items() if s[0] != p}
        elif op["f"] == "rebalance":
            for topic, part in v["assigned"] + v["revoked"]:
                pending.pop((p, topic, part), None)
        elif op["f"] == "seek":
            for k, (topic, part, o) in enumerate(v["offsets"]):
                if o >= 0:
                    pending[(p, topic, part)] = (op["index"], k, o)
                else:
                    pending.pop((p, topic, part), None)
        elif op["f"] == "poll" and op["type"] == "ok":
            for r in v["records"]:
                stream = (p, r["topic"], r["partition"])
                if stream in pending:
                    line, k, o = pending.pop(stream)
                    out.append(SeekRead(line, k, stream, o, r["offset"]))
            for topic, part in v.get("rebalanced", []):  # reset right after its reads
                pending.pop((p, topic, part), None)
    return out


def with_seek_offset(ops: list[dict[str, Any]], s: SeekRead, offset: int) -> list[dict]:
    """``ops`` with the seek entry ``s`` moved to ``offset``."""
    out = list(ops)
    at = next(i for i, op in enumerate(ops) if op["index"] == s.line and op["f"] == "seek")
    entries = [list(e) for e in ops[at]["value"]["offsets"]]
    entries[s.entry][2] = offset
    out[at] = {**ops[at], "value": {**ops[at]["value"], "offsets": entries}}
    return out


def inject_seek_back(
    ops: list[dict], rnd: random.Random, committed_only: bool
) -> tuple[list[dict], tuple] | None:
    """A rewind's seek moved back to an offset its consumer must read, below the
    offset the next read returned: that read skipped it, one ``poll-skip``
    (process, topic, partition, new offset - 1, read offset)."""
    from testkit.reference import expand, known_offsets

    known, committed = known_offsets(expand(ops), committed_only)
    must = committed if committed_only else known  # a seeking process is no drain
    moves = [
        (s, max(x for x in must.get(s.stream[1:], ()) if x < s.read))
        for s in seek_reads(ops)
        if any(x < s.read for x in must.get(s.stream[1:], ()))
    ]
    if not moves:
        return None
    s, x = rnd.choice(moves)
    return with_seek_offset(ops, s, x), (*s.stream, x - 1, s.read)


def inject_seek_ahead(ops: list[dict], rnd: random.Random) -> tuple[list[dict], tuple] | None:
    """A rewind's seek moved past the offset the next read returned: that read
    went back, one ``nonmonotonic-poll`` (process, topic, partition, read, read)."""
    found = seek_reads(ops)
    if not found:
        return None
    s = rnd.choice(found)
    return with_seek_offset(ops, s, s.read + 1), (*s.stream, s.read, s.read)


def inject_report_conflict(ops: list[dict], rnd: random.Random) -> tuple[list[dict], tuple] | None:
    """An unknown or aborted transaction's delivery report moved to an offset where a
    read saw another value: exactly that ``inconsistent-offsets`` (a report names the
    record at its offset whatever the outcome).  Only a value nobody read is moved,
    so it stays at one place and its transaction (never read) cannot look torn."""
    reads = [
        r
        for op in ops
        if op["f"] == "poll" and op["type"] == "ok"
        for r in op["value"]["records"]
        if r.get("value") is not None
    ] + [
        r
        for _, line in completions(ops)
        for m in line["value"]["ops"]
        if m["f"] == "poll" and not m.get("skipped")
        for r in m.get("records", [])
        if r.get("value") is not None
    ]
    read_values = {r["value"] for r in reads}
    reports = [
        (line, k, m)
        for _, line in completions(ops)
        if line["type"] in ("info", "fail")
        for k, m in enumerate(line["value"]["ops"])
        if m["f"] == "send" and not m.get("skipped") and m.get("offset") is not None
        and m["value"] not in read_values
    ]  # fmt: skip
    pairs = [(rep, r) for rep in reports for r in reads if r["topic"] == rep[2]["topic"]]
    if not pairs:
        return None
    (line, k, m), r = rnd.choice(pairs)
    mops = list(line["value"]["ops"])
    mops[k] = {**m, "partition": r["partition"], "offset": r["offset"]}
    out = list(ops)
    at = next(i for i, op in enumerate(ops) if op is line)
    out[at] = {**line, "value": {**line["value"], "ops": mops}}
    values = tuple(sorted({m["value"], r["value"]}))
    return out, (r["topic"], r["partition"], r["offset"], values)
