"""``commit-regression``, written plainly (checkers/queue/commit_checks.py is the Spark twin).

Every commit attempt is an interval: from its invoke (or forever before, if
none was recorded) to its success (or forever after, if its outcome is
unknown or it never completed).  A read that began after a success and
returned less is explained only by an attempt of exactly the value read
that could sit between the success and the end of the read.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from testkit.reference_reads import Anomalies


def attempts(ops: list[dict[str, Any]]) -> list[tuple]:
    """(group, topic, partition, committed, start, end, ok, index) per partition of
    each commit that may have taken effect (``fail`` ones are left out)."""
    out: list[tuple] = []
    pending: dict[Any, dict[str, Any]] = {}
    for op in ops:
        if op["f"] != "commit" or op["process"] == "nemesis":
            continue
        p = op["process"]
        if op["type"] == "invoke":
            if p in pending:  # the one before never completed
                out += _rows(pending.pop(p), pending_op=None)
            pending[p] = op
            continue
        invoke = pending.pop(p, None)
        if op["type"] in ("ok", "info"):
            out += _rows(op, pending_op=invoke)
    for op in pending.values():
        out += _rows(op, pending_op=None)
    return out


def _rows(op: dict[str, Any], pending_op: dict[str, Any] | None) -> list[tuple]:
    v = op["value"]
    if op["type"] == "invoke":
        start, end, ok = op["time"], math.inf, False
    else:
        start = pending_op["time"] if pending_op is not None else -math.inf
        ok = op["type"] == "ok"
        end = op["time"] if ok else math.inf
    return [(v["group"], t, p, o, start, end, ok, op["index"]) for t, p, o in v["offsets"]]


def reads(ops: list[dict[str, Any]]) -> list[tuple]:
    """(group, topic, partition, fetched, start, end, index) per partition of each
    ``committed`` read that returned."""
    out, invoked = [], {}
    for op in ops:
        if op["f"] != "committed":
            continue
        if op["type"] == "invoke":
            invoked[op["process"]] = op["time"]
        elif op["type"] == "ok" and op["process"] in invoked:
            start = invoked.pop(op["process"])
            v = op["value"]
            end, index = op["time"], op["index"]
            out += [(v["group"], t, p, o, start, end, index) for t, p, o in v["offsets"]]
        else:
            invoked.pop(op["process"], None)
    return out


def commit_regressions(ops: list[dict[str, Any]]) -> Anomalies:
    by_key: dict[tuple, list[tuple]] = defaultdict(list)
    for a in attempts(ops):
        by_key[a[:3]].append(a)
    out: Anomalies = defaultdict(list)
    for g, t, p, fetched, r_start, r_end, r_index in reads(ops):
        tries = by_key[(g, t, p)]
        lost = [
            x
            for x in tries
            if x[6] and x[5] < r_start and fetched < x[3]
            and not any(
                y[3] == fetched and y[4] < r_end and y[5] > x[4] for y in tries
            )
        ]  # fmt: skip
        if lost:
            out["commit-regression"].append((g, t, p, fetched, r_index))
    return out
