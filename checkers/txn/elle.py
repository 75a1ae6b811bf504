"""Elle's cycle search (G0, G1c and their -process/-realtime variants) over a Kafka graph.

The caller infers the dependency edges between transactions (ww: two sends
adjacent in a partition's offset order; wr: a poll of a value another
transaction sent) and hands Elle a small graph: usually only the strongly
connected parts of a large one.  Elle adds process and realtime order, finds
the cycles, names them and explains every edge in words, as Jepsen's Kafka
checker does.  It runs in this process's JVM (checkers/txn/elle_jvm.py), started
on the first call that has an edge to search.

    find_cycles(ops, edges, *, search_timeout_s=1.0) -> dict[str, Any]

``ops``: one dict per transaction (its completion), with

    index         int   the completion line's history index
    invoke_index  int   its invoke line's index (< index)
    time          int   completion time, ns
    invoke_time   int   invoke time, ns
    process       int   the client process; a process's transactions must not
                        overlap (one in flight, as the txn workload runs them)
    type          "ok" | "info"
    value         optional, any JSON-like data; Elle prints it in "Let: T1 = ..."

Indices are unique across invokes and completions (history line numbers are).

``edges``: ``(from_index, to_index, kind, data)`` tuples (or dicts with those
keys: ``from``, ``to``, ``kind``, ``data``) between completion indices.
``kind`` is "ww" or "wr"; ``data`` says why, and the explanation is built from
it (missing keys are left out of the sentence):

    ww: {"value": 42, "topic": "t", "partition": 3, "offset": 17,
         "next_value": 43, "next_offset": 18}
        -> "T1 sent 42 to t/3 at offset 17, directly before T2's 43 at offset 18"
    wr: {"value": 42, "topic": "t", "partition": 3, "offset": 17}
        -> "T2 polled 42 from t/3 at offset 17, which T1 sent"

Self-edges (a transaction polling its own send) are dropped, as Jepsen does.

Returns Elle's anomalies, e.g. ``{"G1c-realtime": [cycle, ...]}``; no cycle
gives ``{}``.  Each cycle::

    {"indices": [5, 9],                 # completion indices, in cycle order
     "steps": [{"from": 5, "to": 9, "kind": "ww", "data": {...}, "text": "..."},
               {"from": 9, "to": 5, "kind": "realtime",
                "data": {"completed_index": 9, "invoke_index": 2}, "text": "..."}],
     "text": "Let:\\n  T1 = ...\\n\\nThen:\\n  - T1 < T2, because ..."}

``kind`` is ww, wr, process (data: the process) or realtime (data: the
completion and the later invoke).  Names other than cycle types are Elle's
fallbacks (e.g. ``cycle-search-timeout``, ``PL-1-cycle-exists`` when a search
timed out), passed through as plain data.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kafka_chaos.checkers.txn import elle_jvm

CLOJURE_FILE = Path(__file__).with_name("elle_cycles.clj")
NAMESPACE = "kafka-chaos.elle-cycles"
EDGE_KINDS = ("ww", "wr")
OP_TYPES = ("ok", "info")
_KEYWORD = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")

Edge = tuple[int, int, str, Mapping[str, Any]] | Mapping[str, Any]


def find_cycles(
    ops: Sequence[Mapping[str, Any]],
    edges: Iterable[Edge],
    *,
    search_timeout_s: float = 1.0,
) -> dict[str, Any]:
    """Elle's anomalies in the graph ``edges`` over ``ops`` (formats in the module doc).

    ``search_timeout_s`` bounds Elle's search for each anomaly type in each
    strongly connected component (Elle's own default is 1 s); a search that
    times out yields ``cycle-search-timeout`` and a fallback cycle.
    Raises ValueError for malformed input, before any JVM work.
    """
    checked_ops = _checked_ops(ops)
    checked_edges = _checked_edges(edges, {op["index"] for op in checked_ops})
    if not checked_edges:
        return {}  # process and realtime order alone follow time: never a cycle
    payload = {
        "ops": checked_ops,
        "edges": checked_edges,
        "search-timeout-ms": max(1, round(search_timeout_s * 1000)),
    }
    if elle_jvm.jvm_held_by_another():
        return _in_child(payload)
    return _check(payload)


def _check(payload: dict[str, Any]) -> dict[str, Any]:
    jvm = elle_jvm.clojure()
    jvm.load_file(str(CLOJURE_FILE))
    result = jvm.var(NAMESPACE, "check-json").invoke(to_edn(payload))
    return json.loads(str(result))


# A child's start (JVM and Elle from the AOT cache: 2-3 s here, a first
# compile 5-12 s, more under load) plus a search Elle bounds per anomaly type.
CHILD_TIMEOUT_S = 300.0


def _in_child(payload: dict[str, Any]) -> dict[str, Any]:
    """The same search in a child process, whose JVM is Elle's alone.

    JPype gives a process one JVM, classpath fixed at its start; a run with
    Kafka's Java client holds that client's JVM (workloads/java/jvm.py).
    The payload and the answer are JSON already, so a child costs one start.
    """
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kafka_chaos.checkers.txn.elle"],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"Elle's child process ran past {CHILD_TIMEOUT_S:.0f} s") from e
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"Elle's child process exited {done.returncode}: {last}")
    return json.loads(done.stdout)


def _checked_ops(ops: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ops as EDN-ready dicts; a clear ValueError for what Elle would choke on."""
    out = []
    seen: set[int] = set()
    spans: dict[int, list[tuple[int, int]]] = {}
    for op in ops:
        try:
            index, invoke_index = int(op["index"]), int(op["invoke_index"])
            entry = {
                "index": index,
                "invoke_index": invoke_index,
                "time": int(op["time"]),
                "invoke_time": int(op["invoke_time"]),
                "process": op["process"],
                "type": op["type"],
            }
        except (KeyError, TypeError) as e:
            raise ValueError(f"op {dict(op)!r} lacks or mistypes {e}") from None
        if not isinstance(entry["process"], int) or isinstance(entry["process"], bool):
            raise ValueError(f"op {index}: process must be an int, not {entry['process']!r}")
        if entry["type"] not in OP_TYPES:
            raise ValueError(f"op {index}: type must be one of {OP_TYPES}, not {entry['type']!r}")
        if invoke_index >= index:
            raise ValueError(f"op {index}: invoke_index {invoke_index} must precede it")
        for i in (invoke_index, index):
            if i in seen:
                raise ValueError(f"history index {i} is used twice")
            seen.add(i)
        if "value" in op:
            entry["value"] = op["value"]
        spans.setdefault(entry["process"], []).append((invoke_index, index))
        out.append(entry)
    for process, intervals in spans.items():
        intervals.sort()
        for (_, end), (start, _) in zip(intervals, intervals[1:], strict=False):
            if start < end:
                raise ValueError(
                    f"process {process} has two transactions in flight at once "
                    f"(invoke {start} before completion {end}); Elle needs one at a time"
                )
    return out


def _checked_edges(edges: Iterable[Edge], indices: set[int]) -> list[dict[str, Any]]:
    """Edges as dicts between known completions, self-edges dropped."""
    out = []
    for edge in edges:
        if isinstance(edge, Mapping):
            src, dst, kind, data = edge["from"], edge["to"], edge["kind"], edge.get("data")
        else:
            src, dst, kind, data = edge
        src, dst = int(src), int(dst)
        if kind not in EDGE_KINDS:
            raise ValueError(f"edge {src}->{dst}: kind must be one of {EDGE_KINDS}, not {kind!r}")
        for i in (src, dst):
            if i not in indices:
                raise ValueError(f"edge {src}->{dst} ({kind}): no op has completion index {i}")
        if src != dst:
            out.append({"from": src, "to": dst, "kind": kind, "data": dict(data or {})})
    return out


def to_edn(x: Any) -> str:
    """EDN text for JSON-like data; dict keys that are identifiers become keywords."""
    if x is None:
        return "nil"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"EDN has no {x}")
        return repr(x)
    if isinstance(x, str):
        return json.dumps(x)  # "\n", "\"", "\\" and \uXXXX read back the same in EDN
    if isinstance(x, Mapping):
        items = []
        for k, v in x.items():
            if not isinstance(k, str):
                raise ValueError(f"map keys must be strings, not {k!r}")
            key = ":" + k if _KEYWORD.fullmatch(k) else json.dumps(k)
            items.append(f"{key} {to_edn(v)}")
        return "{" + ", ".join(items) + "}"
    if isinstance(x, list | tuple):
        return "[" + " ".join(to_edn(v) for v in x) + "]"
    raise ValueError(f"cannot pass {type(x).__name__} {x!r} to Elle")


if __name__ == "__main__":  # the child of _in_child: payload on stdin, anomalies on stdout
    print(json.dumps(_check(json.loads(sys.stdin.read()))))
