"""Property tests of the transactional checks (docs/results.md, "Transactional checks").

Valid histories come from ``testkit.synthetic_txn``: the reference must find
no error-severity anomaly in any (int-send-skip, and precommitted-read under
read_uncommitted, are legal and only informative).  Each new anomaly is then
injected into them, and the reference must find exactly the injected key:

* ``aborted-read``: the final drain reads an aborted transaction's value;
* ``torn-transaction``: one value of a committed transaction is never read;
* ``precommitted-read``: a transaction's poll returns one of its own sends;
* ``int-nonmonotonic-poll``: a transaction re-reads a record of a partition;
* ``int-poll-skip``: a transaction's read of an acknowledged record removed
  between two reads of the same partition;
* ``int-nonmonotonic-send``: two sends of a committed transaction to one
  partition swap offsets;
* ``exactly-once``: one output's source changed to another's: that input is
  duplicated in the output, its own input lost.

The Hypothesis test runs the reference only (fast, with shrinking); the
collected histories are then judged by Spark, one job per isolation level
and mode, and must give exactly the reference's keys for every check.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from typing import Any

import pytest
from _txn_cases import (
    Case,
    aborted_sends,
    analyse_cases,
    drain_read,
    over_generated_histories,
    read_committed,
    with_records,
)
from kafka_chaos.checkers.catalog import checks_for, names, severities
from kafka_chaos.checkers.results import NOTHING_ACKED, NOTHING_READ

from testkit import reference
from testkit.reference_txn import completions
from testkit.synthetic_txn import TxnHistory

SEED = int(os.environ.get("TXN_PROPERTY_SEED", "20261124"))
EXAMPLES = int(os.environ.get("TXN_PROPERTY_EXAMPLES", "150"))
NEW = names("txn")

print(f"txn check property tests: seed={SEED} examples={EXAMPLES}")


def new_keys(found: dict[str, list[tuple]]) -> dict[str, Counter]:
    return {name: Counter(keys) for name, keys in found.items() if name in NEW and keys}


def _errors(found: dict[str, Counter], config: dict[str, Any]) -> dict[str, Counter]:
    sev = severities(config)
    return {name: keys for name, keys in found.items() if sev[name] == "error"}


def _record(m: dict[str, Any]) -> dict[str, Any]:
    return {
        "topic": m["topic"],
        "partition": m["partition"],
        "offset": m["offset"],
        "key": str(m["value"]),
        "value": m["value"],
    }


def _replace_line(ops: list[dict], i: int, mops: list[dict]) -> list[dict]:
    out = list(ops)
    out[i] = {**ops[i], "value": {**ops[i]["value"], "ops": mops}}
    return out


def _lines(ops: list[dict]) -> list[tuple[int, int, dict]]:
    """(position in ops, invoke index, completion) of every finished transaction."""
    where = {id(op): i for i, op in enumerate(ops)}
    return [(where[id(line)], txn, line) for txn, line in completions(ops)]


def _acked_values(ops: list[dict]) -> set[int]:
    return {v for *_, v in reference.acks_of(reference.expand(ops))}


def _sends(line: dict) -> list[tuple[int, dict]]:
    return [
        (k, m)
        for k, m in enumerate(line["value"]["ops"])
        if m["f"] == "send" and not m.get("skipped") and m.get("offset") is not None
    ]


def _polled(line: dict) -> list[tuple[int, int, dict]]:
    """(micro-op position, record position, record) of a completion's reads."""
    return [
        (k, j, r)
        for k, m in enumerate(line["value"]["ops"])
        if m["f"] == "poll" and not m.get("skipped")
        for j, r in enumerate(m.get("records", []))
    ]


def _read_values(ops: list[dict]) -> set[int]:
    return {r["value"] for _, _, r in reference.reads_of(reference.expand(ops))}


def inject_torn(h: TxnHistory, rnd: random.Random) -> Case | None:
    read = _read_values(h.ops)
    max_read: dict[tuple, int] = {}
    for _, _, r in reference.reads_of(reference.expand(h.ops)):
        tp = (r["topic"], r["partition"])
        max_read[tp] = max(max_read.get(tp, -1), r["offset"])
    choices = [
        (txn, m["value"])
        for _, txn, line in _lines(h.ops)
        if line["type"] == "ok" and len(sends := _sends(line)) >= 2
        and all(m["value"] in read for _, m in sends)
        for _, m in sends
        if max_read.get((m["topic"], m["partition"]), -1) > m["offset"]
    ]  # fmt: skip
    if not choices:
        return None
    txn, v = rnd.choice(choices)
    ops = [with_records(op, lambda r, v=v: r["value"] != v) for op in h.ops]
    return Case("torn-transaction", ops, h.config, h.seed, want=(txn, (v,)))


def inject_precommitted(h: TxnHistory, rnd: random.Random) -> Case | None:
    choices = []
    for i, txn, line in _lines(h.ops):
        mops = line["value"]["ops"]
        for k, m in _sends(line):
            later = [q for q in range(k + 1, len(mops)) if mops[q]["f"] == "poll"]
            later = [q for q in later if not mops[q].get("skipped")]
            if later:
                choices.append((i, txn, m, later[-1]))
    if not choices:
        return None
    i, txn, m, q = rnd.choice(choices)
    mops = list(h.ops[i]["value"]["ops"])
    mops[q] = {**mops[q], "records": [*mops[q]["records"], _record(m)]}
    ops = _replace_line(h.ops, i, mops)
    return Case("precommitted-read", ops, h.config, h.seed, want=(txn, m["value"]))


def inject_reread(h: TxnHistory, rnd: random.Random) -> Case | None:
    choices = []
    for i, txn, line in _lines(h.ops):
        rebalanced = {tuple(tp) for tp in line["value"].get("rebalanced", [])}
        polled = [x for x in _polled(line) if (x[2]["topic"], x[2]["partition"]) not in rebalanced]
        if polled:
            choices.append((i, txn, line, polled))
    if not choices:
        return None
    i, txn, line, polled = rnd.choice(choices)
    first = polled[0][2]
    tp = (first["topic"], first["partition"])
    last = [r for _, _, r in polled if (r["topic"], r["partition"]) == tp][-1]
    k = polled[-1][0]  # the last poll micro-op with records re-reads the first record
    mops = list(line["value"]["ops"])
    mops[k] = {**mops[k], "records": [*mops[k]["records"], dict(first)]}
    ops = _replace_line(h.ops, i, mops)
    want = (txn, *tp, last["offset"], first["offset"])
    return Case("int-nonmonotonic-poll", ops, h.config, h.seed, want=want)


def inject_poll_skip(h: TxnHistory, rnd: random.Random) -> Case | None:
    acked = _acked_values(h.ops)
    choices = []
    for i, txn, line in _lines(h.ops):
        rebalanced = {tuple(tp) for tp in line["value"].get("rebalanced", [])}
        by_tp: dict[tuple, list] = {}
        for k, j, r in _polled(line):
            by_tp.setdefault((r["topic"], r["partition"]), []).append((k, j, r))
        for tp, seq in by_tp.items():
            if tp in rebalanced:
                continue
            for a, b, c in zip(seq, seq[1:], seq[2:], strict=False):
                increasing = a[2]["offset"] < b[2]["offset"] < c[2]["offset"]
                if b[2]["value"] in acked and increasing:
                    choices.append((i, txn, tp, a[2], b, c[2]))
    if not choices:
        return None
    i, txn, tp, a, (k, j, _), c = rnd.choice(choices)
    mops = list(h.ops[i]["value"]["ops"])
    records = mops[k]["records"]
    mops[k] = {**mops[k], "records": records[:j] + records[j + 1 :]}
    ops = _replace_line(h.ops, i, mops)
    want = (txn, *tp, a["offset"], c["offset"])
    return Case("int-poll-skip", ops, h.config, h.seed, want=want)


def inject_send_swap(h: TxnHistory, rnd: random.Random) -> Case | None:
    choices = []
    for i, txn, line in _lines(h.ops):
        if line["type"] != "ok":
            continue
        first: dict[tuple, int] = {}
        for k, m in _sends(line):
            tp = (m["topic"], m["partition"])
            if tp in first:
                choices.append((i, txn, first[tp], k))
                break
            first[tp] = k
    if not choices:
        return None
    i, txn, k1, k2 = rnd.choice(choices)
    mops = list(h.ops[i]["value"]["ops"])
    a, b = mops[k1]["offset"], mops[k2]["offset"]
    mops[k1], mops[k2] = {**mops[k1], "offset": b}, {**mops[k2], "offset": a}
    ops = _replace_line(h.ops, i, mops)
    want = (txn, mops[k1]["topic"], mops[k1]["partition"], b, a)
    return Case("int-nonmonotonic-send", ops, h.config, h.seed, want=want)


def inject_double_effect(h: TxnHistory, rnd: random.Random) -> Case | None:
    if h.shape.mode != "ctp":
        return None
    read = _read_values(h.ops)
    outputs = [
        (i, k, m["source"])
        for i, _, line in _lines(h.ops)
        if line["type"] == "ok"
        for k, m in _sends(line)
        if m.get("source") is not None and m["value"] in read
    ]
    if len({s for *_, s in outputs}) < 2:
        return None
    (i1, k1, s1), (i2, k2, s2) = rnd.sample(outputs, 2)
    if s1 == s2:
        return None
    mops = list(h.ops[i2]["value"]["ops"])
    mops[k2] = {**mops[k2], "source": s1}
    ops = _replace_line(h.ops, i2, mops)
    return Case("exactly-once", ops, h.config, h.seed, want=("duplicated", s1))


def inject_aborted_read(h: TxnHistory, rnd: random.Random) -> Case | None:
    drained = {
        (r["topic"], r["partition"])
        for op in h.ops
        if op["f"] == "poll" and op["type"] == "ok" and op["value"].get("final")
        for r in op["value"]["records"]
    }
    read = _read_values(h.ops)
    aborted = [a for a in aborted_sends(h.ops) if a[:2] in drained and a[3] not in read]
    if not aborted:
        return None
    record = rnd.choice(aborted)
    ops = drain_read(h.ops, record)
    return Case("aborted-read", ops, h.config, h.seed, want=(record[3],))


INJECTIONS = (
    inject_aborted_read,
    inject_torn,
    inject_precommitted,
    inject_reread,
    inject_poll_skip,
    inject_send_swap,
    inject_double_effect,
)


def mutations(h: TxnHistory) -> list[Case]:
    rnd = random.Random(h.seed)
    cases = [Case("valid", h.ops, h.config, h.seed)]
    for inject in INJECTIONS:
        case = inject(h, rnd)
        if case is not None:
            cases.append(case)
    return cases


COLLECTED: list[Case] = []
FOUND: Counter = Counter()  # ((level, mode), kind, check): the reference's findings


@over_generated_histories(SEED, EXAMPLES, max_txns=40)
def test_reference_finds_exactly_the_injected_txn_anomalies(h: TxnHistory) -> None:
    found = new_keys(reference.check(h.ops, h.config))
    assert not _errors(found, h.config), (h.seed, h.shape, found)
    verdict, gaps = reference.judge(h.ops, h.config)
    assert verdict == ("unknown" if gaps else "valid"), (h.seed, h.shape, verdict, gaps)
    assert set(gaps) <= {NOTHING_ACKED, NOTHING_READ}, (h.seed, gaps)
    for case in mutations(h):
        got = new_keys(reference.check(case.ops, case.config))
        if case.kind != "valid":
            assert case.want in got.get(case.kind, {}), (h.seed, case.kind, case.want, got)
            # The injected anomaly is the only new one of its check (the
            # exactly-once swap also loses the other output's input).
            others = set(got[case.kind]) - {case.want} - set(found.get(case.kind, ()))
            if case.kind == "exactly-once":
                others = {k for k in others if k[0] != "lost"}
            assert not others, (h.seed, case.kind, others)
        COLLECTED.append(case)
        group = (case.config["txn"]["isolation_level"], case.config["txn"]["mode"])
        FOUND.update((group, case.kind, name) for name in got)


def _judge_with_spark(spark, tmp_path, cases: list[Case], config: dict[str, Any]) -> list:
    results = analyse_cases(spark, tmp_path, cases, config)
    mismatches = []
    for hid, case in enumerate(cases):
        checks = results[hid]["checks"]
        assert set(checks) == {c.name for c in checks_for(case.config)}
        got = {
            name: Counter(reference.key_of(name, ex) for ex in c["examples"])
            for name, c in checks.items()
            if c["count"] and name in NEW
        }
        want = new_keys(reference.check(case.ops, case.config))
        if got != want:
            mismatches.append((hid, case.kind, case.source, got, want))
    return mismatches


GROUPS = [("read_committed", "mixed"), ("read_uncommitted", "mixed"), ("read_committed", "ctp")]


@pytest.mark.parametrize("level,mode", GROUPS, ids=["-".join(g) for g in GROUPS])
def test_spark_finds_what_the_reference_finds(spark, tmp_path, record_property, level, mode):
    if not COLLECTED:
        pytest.skip("run together with the reference property test")
    cases = [
        c
        for c in COLLECTED
        if c.config["txn"]["isolation_level"] == level and c.config["txn"]["mode"] == mode
    ]
    kinds = Counter(c.kind for c in cases)
    found = {(kind, name): n for (g, kind, name), n in FOUND.items() if g == (level, mode)}
    record_property(
        "logged",
        f"seed={SEED} (TXN_PROPERTY_SEED), {EXAMPLES} generated histories; {level}/{mode}: "
        f"{len(cases)} judged in one Spark job, per kind {dict(kinds)}; reference findings "
        f"per kind and check {found}",
    )
    mismatches = _judge_with_spark(spark, tmp_path, cases, cases[0].config)
    assert not mismatches, mismatches[:3]
    # Every injection must have been exercised, or these tests could not fail.
    wanted = {"mixed": set(NEW) - {"int-send-skip", "exactly-once"}, "ctp": {"exactly-once"}}[mode]
    if level == "read_uncommitted":
        wanted -= {"torn-transaction"}
    assert wanted <= set(kinds), kinds


def test_read_committed_alone_makes_a_precommitted_read_an_error() -> None:
    committed = {"workload": "txn", "txn": {"isolation_level": "read_committed"}}
    assert severities(committed)["precommitted-read"] == "error"
    assert severities(read_committed(committed, False))["precommitted-read"] == "info"
    assert severities(committed)["int-send-skip"] == "info"
