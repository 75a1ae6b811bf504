"""Pure-Python reference checker: the definitions, written as plainly as possible.

It exists to test the Spark checkers: property tests demand both find exactly
the same anomalies.  It replays the history line by line with dicts and sets,
so it is obviously right and only suitable for small histories.  Each anomaly
is reduced to a hashable *key* that identifies it.

Transactions (``txn`` lines) are first expanded (``expand``) into the send,
poll and commit operations they stand for, as ingest makes their rows
(docs/results.md, "Transactions"), so the definitions below read them as
they read a queue history, with the few rules that differ spelled out.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kafka_chaos.checkers import catalog
from kafka_chaos.checkers.results import (
    LossTally,
    acked_lost_result,
    build_checks,
    evidence_gaps,
    unknown_reasons,
    verdict,
)
from kafka_chaos.checkers.spec_view import CheckedSpec

from testkit.reference_commits import commit_regressions
from testkit.reference_reads import (
    Anomalies,
    aborted_positions,
    acks_of,
    expand,
    groups_of,
    is_final_poll,
    known_offsets,
    read_places,
    reads_of,
    reports_of,
)
from testkit.reference_txn import key_of as txn_key_of
from testkit.reference_txn import txn_anomalies

NS = 1e9


def send_anomalies(ops: list[dict[str, Any]]) -> Anomalies:
    read_values = {r["value"] for _, _, r in reads_of(ops) if r["value"] is not None}
    max_read: dict[tuple, int] = {}
    positions: dict[int, set] = defaultdict(set)
    values_at: dict[tuple, set] = defaultdict(set)
    for _, _, r in reads_of(ops):
        tp = (r["topic"], r["partition"])
        max_read[tp] = max(max_read.get(tp, -1), r["offset"])
        if r["value"] is not None:
            positions[r["value"]].add((*tp, r["offset"]))
            values_at[(*tp, r["offset"])].add(r["value"])
    for _, topic, part, off, val in reports_of(ops):
        positions[val].add((topic, part, off))
        values_at[(topic, part, off)].add(val)
    out: Anomalies = defaultdict(list)
    last_ack: dict[tuple, tuple[int, int]] = {}  # stream -> (offset, index) of its last ack
    acked: set[int] = set()
    for op, topic, part, off, val in acks_of(ops):
        acked.add(val)
        if off >= 0:
            stream = (op["process"], topic, part)
            prev, prev_index = last_ack.get(stream, (None, None))
            # Two acks of one transaction are int-nonmonotonic-send's to judge.
            if prev is not None and off <= prev and prev_index != op["index"]:
                out["nonmonotonic-send"].append((op["process"], topic, part, prev, off))
            last_ack[stream] = (off, op["index"])
        if val not in read_values:
            # No offset (no delivery report): nothing can be read past it.
            placed = op["value"].get("offset") is not None
            lost = placed and max_read.get((topic, part), -1) > off
            out["lost-write" if lost else "unseen"].append((val,))
    sent = {op["value"]["value"] for op in ops if op["f"] == "send" and op["type"] == "invoke"}
    for val, where in positions.items():
        # Acknowledged or not: the clients promise different things of the two.
        if len(where) > 1 and (val in acked or val in sent):
            name = "duplicate" if val in acked else "duplicate-unacked"
            out[name].append((val, tuple(sorted(where))))
    for where, vals in values_at.items():
        if len(vals) > 1:
            out["inconsistent-offsets"].append((*where, tuple(sorted(vals))))
    failed = {  # an aborted transaction's sends are aborted-read's to judge
        op["value"]["value"]
        for op in ops
        if op["f"] == "send" and op["type"] == "fail" and "txn" not in op
    }
    for val in failed & read_values:
        out["failed-write-read"].append((val,))
    return out


def acked_lost(ops: list[dict[str, Any]]) -> tuple[Anomalies, LossTally]:
    """Acknowledged values the final drain did not read: lost where its ``drain``
    lines prove it read the partition from log start to high watermark (excused
    below the log start), undecided elsewhere (docs/results.md, ``acked-lost``)."""
    drained = {r["value"] for op, _, r in reads_of(ops) if is_final_poll(op)}
    read_at = read_places(ops)  # an ack without an offset is placed where its value was
    bounds = {}
    for op in ops:
        if op["f"] == "drain" and op["process"] != "nemesis":
            v = op["value"]
            bounds[(v["topic"], v["partition"])] = v  # the last line of a partition wins

    def complete(b: dict[str, Any] | None) -> bool:
        return (
            b is not None
            and b["high_watermark"] is not None
            and (b["reached"] >= b["high_watermark"])
        )

    whole = bool(bounds) and all(complete(b) for b in bounds.values())
    out: Anomalies = defaultdict(list)
    excused, undecided, unplaced, unproven = 0, 0, 0, set()
    for _, topic, part, off, val in acks_of(ops):
        if val in drained:
            continue
        if off < 0 and len(read_at[val]) == 1:
            (_, _, off), *_ = read_at[val]
        if part is None:
            decided, b = whole, None
        else:
            b = bounds.get((topic, part))
            decided = complete(b)
        start = (b or {}).get("log_start") or 0
        if not decided:
            undecided += 1
            if part is not None:
                unproven.add((topic, part))
        elif off >= 0 and off < start:
            excused += 1
        elif off < 0 and start > 0:
            undecided += 1
            unplaced += 1
        else:
            out["acked-lost"].append((val,))
    names = tuple(f"{t}-{p}" for t, p in sorted(unproven))
    return out, LossTally(excused, undecided, names, unplaced)


def poll_anomalies(ops: list[dict[str, Any]], read_committed: bool = True) -> Anomalies:
    known, committed_known = known_offsets(ops, read_committed)
    _, drain = groups_of(ops)
    out: Anomalies = defaultdict(list)
    # (process, topic, partition) -> offset of the previous read (or one below a seek's)
    last: dict[tuple, int] = {}

    def must_read(process: Any) -> dict[tuple, set]:
        return committed_known if read_committed or process in drain else known

    def read(stream: tuple, b: int) -> None:
        if stream in last:
            a = last[stream]
            if b <= a:
                out["nonmonotonic-poll"].append((*stream, a, b))
            elif any(a < o < b for o in must_read(stream[0]).get(stream[1:], ())):
                out["poll-skip"].append((*stream, a, b))

    for op in ops:
        p = op["process"]
        if op["f"] in ("subscribe", "assign"):
            for stream in [s for s in last if s[0] == p]:
                del last[stream]
        elif op["f"] == "rebalance":
            for topic, part in op["value"]["assigned"] + op["value"]["revoked"]:
                last.pop((p, topic, part), None)
        elif op["f"] == "seek":
            # A seek to o names the next offset to read: as if o - 1 was just read.
            # A logical offset (negative) says nothing: a reset.
            for topic, part, o in op["value"]["offsets"]:
                if o >= 0:
                    last[(p, topic, part)] = o - 1
                else:
                    last.pop((p, topic, part), None)
        elif op["f"] == "poll" and op["type"] == "ok" and "txn" in op:
            # A transaction's reads of a partition: compared with the reads before
            # and after it only (its inside is for the int-* checks).  A partition
            # it rebalanced may have been reset after its last read there.
            spans: dict[tuple, list[int]] = defaultdict(list)
            for r in op["value"]["records"]:
                spans[(p, r["topic"], r["partition"])].append(r["offset"])
            for stream, offsets in spans.items():
                read(stream, offsets[0])
                last[stream] = offsets[-1]
            for topic, part in op["value"]["rebalanced"]:
                last.pop((p, topic, part), None)
        elif op["f"] == "poll" and op["type"] == "ok":
            for r in op["value"]["records"]:
                stream = (p, r["topic"], r["partition"])
                read(stream, r["offset"])
                last[stream] = r["offset"]
    return out


def group_anomalies(
    ops: list[dict[str, Any]], grace_s: float, unowned_s: float, read_committed: bool = True
) -> Anomalies:
    group_of, _ = groups_of(ops)
    end = max((op["time"] for op in ops), default=0)
    owned: dict[Any, set] = defaultdict(set)
    live: dict[str, set] = defaultdict(set)
    since: dict[tuple, int] = {}  # (group, process, tp) -> time ownership started
    runs: list[tuple] = []  # (group, tp, process, start, end)
    universe_topics: dict[str, set] = defaultdict(set)
    all_tps: set = set()
    for op in ops:
        v = op["value"] if isinstance(op["value"], dict) else {}
        if op["f"] == "commit":
            all_tps.update((t, p) for t, p, _ in v.get("offsets", []))
    for _, _, r in reads_of(ops):
        all_tps.add((r["topic"], r["partition"]))
    all_tps.update((topic, part) for _, topic, part, _, _ in reports_of(ops))

    # Replay membership, recording ownership runs and the line-by-line group state.
    states: list[tuple[int, int, dict, dict]] = []  # (index, time, owners per g/tp, live per g)
    for op in ops:
        p = op["process"]
        g = group_of.get(p)
        if g is not None:
            v = op["value"] if isinstance(op["value"], dict) else {}
            before = set(owned[p])
            if op["f"] in ("subscribe", "assign"):
                live[g].add(p)
                universe_topics[g].update(v.get("topics", []))
            if op["f"] == "assign" and op["type"] == "ok":
                owned[p] = {tuple(x) for x in v["partitions"]}
            elif op["f"] == "rebalance":
                owned[p] = (owned[p] - {tuple(x) for x in v["revoked"]}) | {
                    tuple(x) for x in v["assigned"]
                }
            elif op["f"] == "crash":
                owned[p] = set()
                live[g].discard(p)
            for tp in owned[p] - before:
                since[(g, p, tp)] = (op["time"], op["index"])
                universe_topics[g].add(tp[0])
                all_tps.add(tp)
            for tp in before - owned[p]:
                start = since.pop((g, p, tp))
                runs.append((g, tp, p, start, op["time"]))
        owners = {
            (gg, tp): {q for q in owned if group_of.get(q) == gg and tp in owned[q]}
            for gg in live
            for tp in all_tps
        }
        states.append((op["index"], op["time"], owners, {gg: set(m) for gg, m in live.items()}))
    for (g, p, tp), start in since.items():
        runs.append((g, tp, p, start, end))

    out: Anomalies = defaultdict(list)
    for i, (g, tp, p, (s1, _i1), e1) in enumerate(runs):
        for g2, tp2, q, (s2, _i2), e2 in runs[i + 1 :]:
            if (g, tp) == (g2, tp2) and p != q and min(e1, e2) - max(s1, s2) > grace_s * NS:
                out["group-double-ownership"].append((g, *tp, tuple(sorted((p, q))), max(s1, s2)))

    for g in set(group_of.values()):
        for tp in all_tps:
            if tp[0] not in universe_topics[g]:
                continue
            bad_since = None
            for index, time, owners, lives in states:
                bad = not owners.get((g, tp)) and bool(lives.get(g))
                if bad and bad_since is None:
                    bad_since = (time, index)
                elif not bad and bad_since is not None:
                    if time - bad_since[0] > unowned_s * NS:
                        out["group-unowned"].append((g, *tp, bad_since[0]))
                    bad_since = None
            if bad_since is not None and end - bad_since[0] > unowned_s * NS:
                out["group-unowned"].append((g, *tp, bad_since[0]))

    read_all: dict[tuple, set] = defaultdict(set)
    read_by: dict[tuple, set] = defaultdict(set)
    for op, _, r in reads_of(ops):
        tp = (r["topic"], r["partition"])
        read_all[tp].add(r["offset"])
        if op["process"] in group_of:
            read_by[(group_of[op["process"]], *tp)].add(r["offset"])
    committed: dict[tuple, int] = {}
    for op in ops:
        if op["f"] == "commit" and op["type"] == "ok" and op["process"] in group_of:
            g = group_of[op["process"]]
            for t, p, o in op["value"]["offsets"]:
                committed[(g, t, p)] = max(committed.get((g, t, p), o), o)
    skippable = aborted_positions(ops) if read_committed else set()
    for (g, t, p), c in committed.items():
        unread = sorted(
            o
            for o in read_all[(t, p)]
            if o < c and o not in read_by[(g, t, p)] and (t, p, o) not in skippable
        )
        if unread:
            out["group-commit-past-unread"].append((g, t, p, tuple(unread)))
    return out


def evidence(ops: list[dict[str, Any]]) -> dict[str, int]:
    """What a verdict rests on: sends acked, distinct offsets read (by any poll,
    whatever the value), faults started, and faults that failed to take effect
    (an error on the start line, or on the end line when applying it failed)."""
    ops = expand(ops)
    faults = [
        op["value"]
        for op in ops
        if op["process"] == "nemesis"
        and isinstance(op["value"], dict)
        and isinstance(op["value"].get("id"), int)
    ]
    return {
        "acked_sends": sum(1 for _ in acks_of(ops)),
        "read_offsets": len({(r["topic"], r["partition"], r["offset"]) for *_, r in reads_of(ops)}),
        "faults": len({v["id"] for v in faults if v.get("phase") == "start"}),
        "failed_faults": len({v["id"] for v in faults if isinstance(v.get("error"), str)}),
    }


def judge(ops: list[dict[str, Any]], config: dict[str, Any]) -> tuple[str, list[str]]:
    """(verdict, evidence gap codes) of a history, from the anomalies found here and
    its ``evidence``, by the rules of checkers/results.py."""
    counts = {name: len(keys) for name, keys in check(ops, config).items()}
    final = any(is_final_poll(op) for op in ops)
    checks = checks_of(counts, config, final, acked_lost(expand(ops))[1])
    found = evidence(ops)
    return verdict(checks, unknown_reasons(checks, found)), evidence_gaps(found)


def checks_of(
    counts: dict[str, int], config: dict[str, Any], final: bool, losses: LossTally | None = None
) -> dict[str, dict[str, Any]]:
    """results.json's checks from anomaly counts, by the product's rules: every
    check of the run (checkers/catalog.py), with acked-lost's tallies ``losses``."""
    spec = CheckedSpec.of(config)
    tally = losses or LossTally()
    found = {name: (n, []) for name, n in counts.items()}
    checks = build_checks(catalog.checks_for(spec), spec, found, final and not tally.undecided)
    acked_lost_result(checks["acked-lost"], tally, final)
    return checks


def check(ops: list[dict[str, Any]], config: dict[str, Any]) -> Anomalies:
    """Every anomaly of every check, as keys."""
    checker = config.get("checker", {})
    committed_only = config.get("txn", {}).get("isolation_level", "read_committed") == (
        "read_committed"
    )
    raw, ops = ops, expand(ops)
    found: Anomalies = defaultdict(list)
    for part in (
        send_anomalies(ops),
        acked_lost(ops)[0],
        poll_anomalies(ops, committed_only),
        group_anomalies(
            ops,
            checker.get("ownership_grace_s", 10.0),
            checker.get("unowned_threshold_s", 30.0),
            committed_only,
        ),
        commit_regressions(ops),
    ):
        for name, keys in part.items():
            found[name] += keys
    if CheckedSpec.of(config).workload == "txn":
        for name, keys in txn_anomalies(raw, config).items():
            found[name] += keys
    return found


def key_of(check_name: str, ex: dict[str, Any]) -> tuple:
    """The reference's key for one example the Spark checker reported."""
    if check_name not in catalog.names("queue"):
        return txn_key_of(check_name, ex)
    if check_name in ("lost-write", "unseen", "acked-lost", "failed-write-read"):
        return (ex["value"],)
    if check_name in ("duplicate", "duplicate-unacked"):
        return (ex["value"], tuple(sorted(tuple(p) for p in ex["positions"])))
    if check_name == "inconsistent-offsets":
        return (ex["topic"], ex["partition"], ex["offset"], tuple(ex["values"]))
    if check_name in ("nonmonotonic-send", "nonmonotonic-poll", "poll-skip"):
        return (ex["process"], ex["topic"], ex["partition"], ex["from_offset"], ex["to_offset"])
    if check_name == "group-double-ownership":
        return (
            ex["group"],
            ex["topic"],
            ex["partition"],
            tuple(ex["members"]),
            round(ex["start_s"] * NS),
        )
    if check_name == "group-unowned":
        return (ex["group"], ex["topic"], ex["partition"], round(ex["start_s"] * NS))
    if check_name == "group-commit-past-unread":
        return (ex["group"], ex["topic"], ex["partition"], tuple(ex["unread_offsets"]))
    if check_name == "commit-regression":
        return (ex["group"], ex["topic"], ex["partition"], ex["fetched"], ex["read_index"])
    raise KeyError(check_name)
