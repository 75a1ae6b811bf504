"""Reference definitions of the transactional checks, written as plainly as possible.

The twin of ``checkers.txn.txn_checks`` (Spark): property tests demand that both
find exactly the same anomalies, keyed the same way (``key_of``).  It reads
the raw ``txn`` lines, whose completions list every micro-op in order, and
the polls every line stands for (``testkit.reference.expand``), so a
transaction's reads, sends and commits are those the existing checks see.
The definitions are in docs/results.md, "Transactional checks".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from kafka_chaos.checkers.spec_view import CheckedSpec

from testkit.reference_reads import Anomalies, acks_of, expand, groups_of, known_offsets, reads_of


def completions(ops: list[dict[str, Any]]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(invoke index, completion line) of every finished transaction."""
    open_txn: dict[Any, int] = {}
    for op in ops:
        if op["f"] != "txn" or op["process"] == "nemesis":
            continue
        if op["type"] == "invoke":
            open_txn[op["process"]] = op["index"]
        elif op["process"] in open_txn:
            yield open_txn.pop(op["process"]), op


def _sent(line: dict[str, Any]) -> list[dict[str, Any]]:
    """A completion's sends that reached Kafka (not ``skipped``)."""
    return [m for m in line["value"]["ops"] if m["f"] == "send" and not m.get("skipped")]


def _records(line: dict[str, Any]) -> list[dict[str, Any]]:
    """A completion's polled records, in the order its polls returned them."""
    return [
        r
        for m in line["value"]["ops"]
        if m["f"] == "poll" and not m.get("skipped")
        for r in m.get("records", [])
    ]


def _has_offset(m: dict[str, Any]) -> bool:
    return m.get("offset") is not None and m["offset"] >= 0 and m.get("partition") is not None


def txn_anomalies(ops: list[dict[str, Any]], config: dict[str, Any]) -> Anomalies:
    """Every anomaly of the transactional checks, as keys (``key_of``)."""
    read_committed = config.get("txn", {}).get("isolation_level", "read_committed") == (
        "read_committed"
    )
    flat = expand(ops)
    _, drain = groups_of(flat)
    reads = list(reads_of(flat))
    read_values = {r["value"] for _, _, r in reads}
    # Reads by readers that promised committed data: only they prove a commit.
    committed_reads = [(op, r) for op, _, r in reads if read_committed or op["process"] in drain]
    proof = {r["value"] for _, r in committed_reads}
    max_read: dict[tuple, int] = {}
    for _, _, r in reads:
        tp = (r["topic"], r["partition"])
        max_read[tp] = max(max_read.get(tp, -1), r["offset"])
    known = known_offsets(flat)
    txns = list(completions(ops))
    out: Anomalies = defaultdict(list)

    # aborted-read: a value only an aborted transaction sent, read by a reader
    # that promised committed data (every consumer under read_committed; the
    # final drain always).
    # (A skipped send is definitely not written, so it counts as aborted too.)
    aborted = {
        op["value"]["value"]
        for op in flat
        if op["f"] == "send" and op["type"] == "fail" and "txn" in op
    }
    aborted -= {v for _, _, _, _, v in acks_of(flat)}
    seen_aborted = {r["value"] for _, r in committed_reads if r["value"] in aborted}
    out["aborted-read"] += [(v,) for v in seen_aborted]

    for txn, line in txns:
        sent = _sent(line)
        own = {m["value"] for m in line["value"]["ops"] if m["f"] == "send"}
        records = _records(line)
        # precommitted-read: a transaction read its own, not yet committed, sends.
        for v in sorted({r["value"] for r in records} & own):
            out["precommitted-read"].append((txn, v))
        # torn-transaction: a committed transaction (or an unknown one that a
        # read_committed read proves committed) partly read: a send never read
        # although its partition was read past its offset.
        if (line["type"] == "ok" and own & read_values) or (line["type"] == "info" and own & proof):
            torn = sorted(
                m["value"]
                for m in sent
                if m["value"] not in read_values
                and _has_offset(m)
                and max_read.get((m["topic"], m["partition"]), -1) > m["offset"]
            )
            if torn:
                out["torn-transaction"].append((txn, tuple(torn)))
        _inside(out, txn, line, known, read_committed)

    if CheckedSpec.of(config).ctp:
        out["exactly-once"] += _exactly_once(flat, txns, read_values)
    return out


def _inside(
    out: Anomalies, txn: int, line: dict[str, Any], known: tuple[dict, dict], committed: bool
) -> None:
    """The int-* checks: order inside one transaction, partition by partition."""
    every, must = known
    rebalanced = {tuple(tp) for tp in line["value"].get("rebalanced", [])}
    must_read = must if committed else every

    def walk(offsets: dict[tuple, list[int]], back: str, skip: str, skippable: dict) -> None:
        for tp, seq in offsets.items():
            for a, b in zip(seq, seq[1:], strict=False):
                if b <= a:
                    out[back].append((txn, *tp, a, b))
                elif any(a < o < b for o in skippable.get(tp, ())):
                    out[skip].append((txn, *tp, a, b))

    polled: dict[tuple, list[int]] = defaultdict(list)
    for r in _records(line):
        tp = (r["topic"], r["partition"])
        if tp not in rebalanced:
            polled[tp].append(r["offset"])
    walk(polled, "int-nonmonotonic-poll", "int-poll-skip", must_read)
    sends: dict[tuple, list[int]] = defaultdict(list)
    for m in _sent(line) if line["type"] == "ok" else ():  # acknowledged writes only
        if _has_offset(m):
            sends[(m["topic"], m["partition"])].append(m["offset"])
    walk(sends, "int-nonmonotonic-send", "int-send-skip", every)


def _exactly_once(
    flat: list[dict[str, Any]], txns: list[tuple[int, dict[str, Any]]], read_values: set
) -> list[tuple]:
    """Consume-transform-produce: every input below the offsets the pipeline
    committed must appear in the output exactly once (keys: kind, input value)."""
    committed: dict[tuple, int] = {}
    for op in flat:
        if op["f"] == "commit" and op["type"] == "ok" and "txn" in op:
            for topic, part, off in op["value"]["offsets"]:
                committed[(topic, part)] = max(committed.get((topic, part), off), off)
    inputs = set()
    for _, topic, part, off, v in acks_of(flat):
        if 0 <= off < committed.get((topic, part), 0):
            inputs.add(v)
    for _, _, r in reads_of(flat):
        if r["offset"] < committed.get((r["topic"], r["partition"]), 0):
            inputs.add(r["value"])
    outputs: dict[int, set] = defaultdict(set)  # input value -> output values read
    for _, line in txns:
        for m in _sent(line):
            if m.get("source") is not None and m["value"] in read_values:
                outputs[m["source"]].add(m["value"])
    found = [("lost", v) for v in inputs if not outputs.get(v)]
    found += [("duplicated", v) for v, outs in outputs.items() if len(outs) > 1]
    return found


def key_of(check_name: str, ex: dict[str, Any]) -> tuple:
    """The reference's key for one example the Spark checker reported."""
    if check_name == "aborted-read":
        return (ex["value"],)
    if check_name == "precommitted-read":
        return (ex["txn"], ex["value"])
    if check_name == "torn-transaction":
        return (ex["txn"], tuple(ex["unread_values"]))
    if check_name.startswith("int-"):
        return (ex["txn"], ex["topic"], ex["partition"], ex["from_offset"], ex["to_offset"])
    if check_name == "exactly-once":
        return (ex["kind"], ex["value"])
    raise KeyError(check_name)
