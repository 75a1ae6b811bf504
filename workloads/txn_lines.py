"""The txn workload's own history line, ``txn`` (docs/history.md): how it is
checked, how it becomes rows, and how a history's rows show it.

Why here: a transaction line is what the txn workload writes, so it declares
the line with the workload (``workloads/registry.py``): its checks, its rows,
the columns those rows add to the rows table and the kind of row stored
apart (``checkers.ingest.line_rows.ROWS``, ``KINDS``).  Ingest's fast path
(``arrow``) builds the same rows with Arrow, and tests/unit/test_txn_ingest.py
holds the two paths equal.
"""

from __future__ import annotations

from typing import Any

from kafka_chaos.workloads.declared_parts import Column, LineKind, RowsFacts, Shown

F = "txn"
# What the rows a transaction line gives copy of the line itself; the rest is
# their own (``rows``).
_OF_THE_LINE = ("hid", "index", "time", "process", "nemesis", "type")
# The columns of a transaction line's own row (its ``txn`` partition).
_OWN_ROW = (
    "hid", "index", "time", "process", "nemesis", "type", "f", "error", "reason",
    "final", "group", "txn", "rebalanced",
)  # fmt: skip


class _Bad(Exception):
    """The first thing wrong with a line: ``problem`` returns it."""


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise _Bad(what)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _int_or_null(x: Any) -> bool:
    return x is None or _is_int(x)


def _is_tuples(items: Any, width: int) -> bool:
    return isinstance(items, list) and all(
        isinstance(x, list)
        and len(x) == width
        and isinstance(x[0], str)
        and all(_is_int(y) for y in x[1:])
        for x in items
    )


def _is_record(r: Any) -> bool:
    return (
        isinstance(r, dict)
        and isinstance(r.get("topic"), str)
        and _is_int(r.get("partition"))
        and _is_int(r.get("offset"))
        and (r.get("value") is None or _is_int(r.get("value")))
    )


def problem(value: dict[str, Any], typ: str) -> str | None:
    """What is wrong with a ``txn`` line's value (its micro-ops), or None."""
    try:
        _check(value, typ)
    except _Bad as e:
        return str(e)
    return None


def _check(value: dict[str, Any], typ: str) -> None:
    ops = value.get("ops")
    _need(isinstance(ops, list), "txn value.ops must be a list of micro-ops")
    for key, width in (("offsets", 3), ("rebalanced", 2)):
        if key in value:
            what = f"{key} must be a list of [topic, partition{', offset' * (width - 2)}]"
            _need(_is_tuples(value[key], width), what)
    for k, m in enumerate(ops):
        what = f"txn micro-op {k}"
        _need(isinstance(m, dict), f"{what} must be an object")
        _need(m.get("f") in ("send", "poll"), f"{what}: f must be 'send' or 'poll'")
        skipped = m.get("skipped")
        _need(skipped in (None, True, False), f"{what}: skipped must be a boolean")
        if m["f"] == "send":
            _need(_is_int(m.get("value")), f"{what}: send value must be an integer")
            _need(isinstance(m.get("topic"), str), f"{what}: send topic must be a string")
            for key in ("partition", "offset", "source"):
                _need(_int_or_null(m.get(key)), f"{what}: send {key} must be an integer or null")
            # A send with no delivery report has neither (docs/history.md); one
            # with a partition the client chose and no report has no offset.
            # An offset with no partition names no place in any log.
            _need(
                m.get("offset") is None or m.get("partition") is not None,
                f"{what}: a send's offset needs its partition",
            )
        elif "records" in m or (typ != "invoke" and not skipped):
            records = m.get("records")
            _need(isinstance(records, list), f"{what}: poll records must be a list")
            _need(
                all(_is_record(r) for r in records),
                f"{what}: poll record needs topic (str), partition, offset and value (int or null)",
            )


def _pairs(x: Any) -> list[dict[str, Any]] | None:
    return None if x is None else [{"topic": t, "partition": p} for t, p in x]


def _triples(x: Any) -> list[dict[str, Any]] | None:
    return None if x is None else [{"topic": t, "partition": p, "offset": o} for t, p, o in x]


def rows(line: dict[str, Any], v: dict[str, Any], invoke: int | None) -> list[dict[str, Any]]:
    """A ``txn`` line's rows: the line (its ``txn`` row), a row per send
    micro-op, and on a completion one poll row with every record its polls
    returned, and a commit row for the offsets it sent (docs/results.md).
    ``invoke``: on a completion, the index of its invoke line."""
    typ = line["type"]
    done = typ != "invoke"
    txn = invoke if done else line["index"]
    own = {k: line[k] for k in _OF_THE_LINE}
    out = [{**line, "txn": txn, "rebalanced": _pairs(v.get("rebalanced"))}]
    records: list[tuple[int, dict[str, Any]]] = []
    polled = False
    for k, m in enumerate(v["ops"]):
        skipped = m.get("skipped") is True
        if m["f"] == "send":
            out.append(
                {
                    **own,
                    "f": "send",
                    "type": typ if not done or not skipped else "fail",
                    "final": False,
                    "error": line["error"] if done else None,
                    "topic": m["topic"],
                    "val": m["value"],
                    "partition": m.get("partition"),
                    "offset": m.get("offset") if done else None,
                    "source": m.get("source"),
                    "txn": txn,
                    "mop": k,
                }
            )
        elif done and not skipped:
            polled = True
            records += [(k, r) for r in m["records"]]
    if polled:
        poll = {**own, "type": "ok", "f": "poll", "final": False, "txn": txn}
        out.append(poll)
        out += [
            {
                **poll,
                "j": j,
                "mop": k,
                "topic": r["topic"],
                "partition": r["partition"],
                "offset": r["offset"],
                "val": r.get("value"),
            }
            for j, (k, r) in enumerate(records)
        ]
    if done and "offsets" in v:
        out.append(
            {
                **own,
                "f": "commit",
                "final": False,
                "error": line["error"],
                "group": line["group"],
                "offsets": _triples(v["offsets"]),
                "txn": txn,
            }
        )
    return out


TXN_LINE = LineKind(
    F,
    problem,
    rows,
    needs_value=True,
    # The index of the transaction's invoke line (on every row it gives), the
    # micro-op's position in it, the input value a consume-transform-produce
    # send transforms, and the partitions rebalanced while it ran.
    columns=(
        Column("txn", "int64", ("line", "record", "control", F, "commit")),
        Column("mop", "int32", ("line", "record")),
        Column("source", "int64", ("line", "record")),
        Column("rebalanced", "pairs", (F,)),
    ),
    # A transaction line's own row is kept apart (about half its lines), out
    # of the ``control`` rows the many checks cache.
    stored=((F, _OWN_ROW),),
    paired=True,
    arrow="kafka_chaos.checkers.ingest.txn_rows",
)


def _ctp(facts: RowsFacts, config: dict[str, Any]) -> None:
    """Sends that copy an input are consume-transform-produce."""
    ctp = facts.any_valid("line", "source")
    config.setdefault(F, {})["mode"] = "ctp" if ctp else "mixed"


# A transactional history has ``txn`` rows; no other workload writes them.
SHOWN = (Shown(F, lambda facts: facts.count(F) > 0, implies=_ctp),)
