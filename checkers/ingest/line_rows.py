"""One history line, as a parsed dict -> its validated rows (the Python path of ingest).

The slow path of ``checkers/ingest/convert.py`` runs every line of a chunk through
here, and the fast path the few lines Arrow cannot type (membership, commits,
faults).  Validation names the line and the problem, so a malformed history
gets an error a person can act on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
from kafka_chaos.harness.errors import HistoryError
from kafka_chaos.harness.history import NEMESIS, check_envelope
from kafka_chaos.workloads import registry as workloads


def pair_lists(topic: pa.DataType) -> tuple[pa.DataType, pa.DataType]:
    """Types of [topic, partition] and [topic, partition, offset] lists, topics as ``topic``."""
    pair = pa.struct([("topic", topic), ("partition", pa.int32())])
    triple = pa.struct([("topic", topic), ("partition", pa.int32()), ("offset", pa.int64())])
    return pa.list_(pair), pa.list_(triple)


_PAIR, _TRIPLE = pair_lists(pa.string())
DRAIN_BOUNDS = ("log_start", "high_watermark", "reached")  # a ``drain`` line's offsets
# The history contract's own columns; the final drain's bounds come last.
_CONTRACT = [
    ("hid", pa.int32()),
    ("index", pa.int64()),
    ("time", pa.int64()),
    ("process", pa.int64()),  # null for the nemesis
    ("nemesis", pa.bool_()),
    ("type", pa.string()),
    ("f", pa.string()),
    ("j", pa.int32()),  # position of the record in its poll; null on line rows
    ("topic", pa.string()),
    ("val", pa.int64()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("error", pa.string()),
    ("final", pa.bool_()),
    ("group", pa.string()),
    ("topics", pa.list_(pa.string())),
    ("partitions", _PAIR),
    ("assigned", _PAIR),
    ("revoked", _PAIR),
    ("offsets", _TRIPLE),
    ("phase", pa.string()),
    ("fault_id", pa.int64()),
    ("targets", pa.list_(pa.string())),
    ("planned_s", pa.float64()),  # fault lines: the schedule's time of this edge
    ("at_s", pa.float64()),  # fault lines: when it really happened (docs/history.md)
    ("reason", pa.string()),
]
# The final drain's bounds of one partition (docs/history.md, ``drain``): the
# log start offset, the high watermark, and the next offset the drain would
# have read; ``acked-lost`` (checkers/queue/loss_checks.py) proves completeness by them.
_DRAIN = [(name, pa.int64()) for name in DRAIN_BOUNDS]
# The types a line kind's own columns may have (``workloads.declared_parts.Column``).
COLUMN_TYPES = {"int32": pa.int32(), "int64": pa.int64(), "string": pa.string(), "pairs": _PAIR}
# The line kinds the workloads declare (workloads/registry.py) when ingest
# loads: the rows table's shape is fixed from here on (``check_declared``).
DECLARED = workloads.line_kinds()
# Their own columns (the txn workload's: the index of the transaction's
# invoke line, the micro-op's position in it, the input value a
# consume-transform-produce send transforms, the partitions rebalanced while
# it ran; docs/history.md, ``txn``).
COLUMNS = tuple(c for kind in DECLARED for c in kind.columns)
ROWS = pa.schema(_CONTRACT + [(c.name, COLUMN_TYPES[c.type]) for c in COLUMNS] + _DRAIN)
# ``txn`` of the rows of a paired line's completion until ingest pairs it with
# its invoke (checkers/ingest/txn_rows.py ``TxnPairing``): the worker that parses a
# chunk cannot see an invoke in an earlier chunk.
TXN_PENDING = -1


# The Parquet partitions of the rows table.  ``control`` is cached in one
# partition for the many checks that read its few lines (membership, faults),
# so the kinds of row a history has many of are kept out of it: the kinds a
# workload's line stores apart (a transaction line's own row is ``txn``,
# about half its lines), and offset commits are ``commit`` (one per
# transaction that sent offsets: at 1e7 transactional ops, 1.8e6 of the
# 2.7e6 control rows, whose single-task cache took 20 s and the members'
# copy of it 16 s more).
STORED_APART = {f: written for kind in DECLARED for f, written in kind.stored}
APART = (*STORED_APART, "commit")
KINDS = ("line", "record", "control", *APART)


def check_declared() -> None:
    """Refuse a line kind declared after ingest loaded whose rows need columns
    or kinds of row the rows table does not have (ValueError, one line)."""
    for kind in workloads.line_kinds():
        missing = [c.name for c in kind.columns if c.name not in ROWS.names]
        missing += [f"kind={f}" for f, _ in kind.stored if f not in STORED_APART]
        if missing:
            raise ValueError(
                f"line kind {kind.f!r} needs {', '.join(missing)}, unknown to ingest: "
                "register its workload before kafka_chaos.checkers.ingest is imported"
            )


def kind_of(row: dict[str, Any]) -> str:
    """``record`` for a polled record, ``line`` for a send or poll line, the
    row's ``f`` for the kinds stored apart (``APART``), else ``control``."""
    if row.get("j") is not None:
        return "record"
    if row["nemesis"]:
        return "control"
    if row["f"] in APART:
        return row["f"]
    return "line" if row["f"] in ("send", "poll") else "control"


def checked(op: Any, lineno: int, path: Path) -> dict[str, Any]:
    """``op`` if it is a valid line, else HistoryError naming ``lineno`` and the problem."""
    check_envelope(op, lineno, path)
    hid = op.get("hid", 0)
    _need(_is_int(hid) or hid is None, path, lineno, "hid must be an integer")
    check_value(lineno, op, path)
    return op


def rows_of(op: dict[str, Any], invoke: int | None = None) -> list[dict[str, Any]]:
    """The rows of one checked line: the line itself, then one per polled record.

    A workload's own line kind gives the rows its declaration makes (a
    ``txn`` line those of docs/results.md, ``txn`` rows); for the completion
    of a paired kind, ``invoke`` is the index of its invoke line
    (``TXN_PENDING`` if not known yet).  Fields the checkers do not read, or that have an
    unexpected type where the contract leaves them open (fault parameters),
    are left out: readers ignore what they do not know.
    """
    v = op["value"] if isinstance(op["value"], dict) else {}
    f = op["f"]
    nemesis = op["process"] == NEMESIS
    line = {
        "hid": op.get("hid") or 0,
        "index": op["index"],
        "time": op["time"],
        "process": None if nemesis else op["process"],
        "nemesis": nemesis,
        "type": op["type"],
        "f": f,
        "final": v.get("final") is True,
        "error": _typed(v, "error", str),
        "reason": _typed(v, "reason", str),
    }
    if nemesis:
        line.update(
            phase=_typed(v, "phase", str),
            fault_id=_typed(v, "id", int),
            targets=_strings(v.get("targets")),
            planned_s=_number(v, "planned_s"),
            at_s=_number(v, "at_s"),
        )
        return [line]
    line.update(
        topic=_typed(v, "topic", str),
        val=_typed(v, "value", int),
        partition=_typed(v, "partition", int),
        offset=_typed(v, "offset", int),
        group=_typed(v, "group", str),
        topics=_strings(v.get("topics")),
    )
    if f in ("rebalance", "assign"):  # pairs checked by check_value
        line.update({k: _pairs(v.get(k)) for k in ("partitions", "assigned", "revoked")})
    if f == "committed":
        line["partitions"] = _pairs(v.get("partitions"))
    if f in ("commit", "seek", "committed"):
        line["offsets"] = _triples(v.get("offsets"))
    if f == "drain":
        line.update({k: _typed(v, k, int) for k in DRAIN_BOUNDS})
    declared = workloads.line_kind(f)
    if declared is not None:  # a workload's own line (workloads/declared_parts.py)
        if declared.paired and invoke is None:
            invoke = TXN_PENDING
        return declared.rows(line, v, invoke)
    if not (f == "poll" and op["type"] == "ok"):
        return [line]
    return [line] + [
        {
            **line,
            "j": j,
            "topic": r["topic"],
            "partition": r["partition"],
            "offset": r["offset"],
            "val": r.get("value"),
        }
        for j, r in enumerate(v["records"])
    ]


def _typed(v: dict[str, Any], key: str, kind: type) -> Any:
    x = v.get(key)
    return x if isinstance(x, kind) and not isinstance(x, bool) else None


def _number(v: dict[str, Any], key: str) -> float | None:
    x = v.get(key)
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _strings(x: Any) -> list[str] | None:
    return x if isinstance(x, list) and all(isinstance(s, str) for s in x) else None


def _pairs(x: Any) -> list[dict[str, Any]] | None:
    return None if x is None else [{"topic": t, "partition": p} for t, p in x]


def _triples(x: Any) -> list[dict[str, Any]] | None:
    return None if x is None else [{"topic": t, "partition": p, "offset": o} for t, p, o in x]


# --- value checks -------------------------------------------------------------------------


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _need(cond: bool, path: Path, lineno: int, what: str) -> None:
    if not cond:
        raise HistoryError(f"{path}: line {lineno}: {what}")


def _check_pairs(items: Any, width: int, name: str, path: Path, lineno: int) -> None:
    ok = isinstance(items, list) and all(
        isinstance(x, list)
        and len(x) == width
        and isinstance(x[0], str)
        and all(_is_int(y) for y in x[1:])
        for x in items
    )
    _need(
        ok, path, lineno, f"{name} must be a list of [topic, partition{', offset' * (width - 2)}]"
    )


def check_value(lineno: int, op: dict[str, Any], path: Path) -> None:
    """Type-check the ``value`` of the operations the checkers read."""
    value, f, typ = op.get("value"), op["f"], op["type"]
    if value is None:
        _need(
            f == "poll"
            and typ == "invoke"
            or op["process"] == NEMESIS
            or f not in ("send", "seek")
            and not _needs_value(f),
            path,
            lineno,
            f"{f} {typ} needs a value object",
        )
        return
    if not isinstance(value, dict):
        _need(False, path, lineno, f"value must be an object or null, got {json.dumps(value)[:60]}")
    if f == "send":
        _need(_is_int(value.get("value")), path, lineno, "send value.value must be an integer")
        _need(
            isinstance(value.get("topic"), str), path, lineno, "send value.topic must be a string"
        )
        if typ == "ok":
            _need(
                _is_int(value.get("partition")),
                path,
                lineno,
                "send ok value.partition must be an integer",
            )
            # null: acknowledged without a place (DUPLICATE_SEQUENCE_NUMBER, docs/history.md)
            _need(
                value.get("offset") is None or _is_int(value["offset"]),
                path,
                lineno,
                "send ok value.offset must be an integer or null",
            )
    elif f == "poll" and typ == "ok":
        records = value.get("records")
        _need(isinstance(records, list), path, lineno, "poll ok value.records must be a list")
        _check_records(records, path, lineno, "poll record")
    elif f in ("rebalance", "assign"):
        for key in ("assigned", "revoked", "partitions"):
            if key in value:
                _check_pairs(value[key], 2, key, path, lineno)
    elif f in ("commit", "seek") and "offsets" in value:
        _check_pairs(value["offsets"], 3, "offsets", path, lineno)
    elif f == "committed":
        _check_pairs(value.get("partitions", []), 2, "partitions", path, lineno)
        if typ == "ok":
            _need("offsets" in value, path, lineno, "committed ok needs value.offsets")
            _check_pairs(value["offsets"], 3, "offsets", path, lineno)
    elif f == "drain" and op["process"] != NEMESIS:
        _need(
            isinstance(value.get("topic"), str)
            and _is_int(value.get("partition"))
            and all(_int_or_null(value.get(k)) for k in DRAIN_BOUNDS),
            path,
            lineno,
            "drain needs topic (str), partition, and log_start, high_watermark, reached "
            "(int or null)",
        )
    elif op["process"] == NEMESIS and "id" in value:
        _need(_is_int(value["id"]), path, lineno, "fault id must be an integer")
    elif op["process"] != NEMESIS and (declared := workloads.line_kind(f)) is not None:
        problem = declared.problem(value, typ)  # a workload's own line
        _need(problem is None, path, lineno, problem or "")


def _check_records(records: list[Any], path: Path, lineno: int, what: str) -> None:
    for r in records:
        _need(
            isinstance(r, dict)
            and isinstance(r.get("topic"), str)
            and _is_int(r.get("partition"))
            and _is_int(r.get("offset"))
            and (r.get("value") is None or _is_int(r.get("value"))),
            path,
            lineno,
            f"{what} needs topic (str), partition, offset and value (int or null)",
        )


def _int_or_null(x: Any) -> bool:
    return x is None or _is_int(x)


def _needs_value(f: str) -> bool:
    declared = workloads.line_kind(f)
    return declared is not None and declared.needs_value
