"""A small pure-Python cycle finder: the twin of the Spark + Elle path, for tests.

It builds the same transaction graph as ``checkers.txn.txn_graph`` (ww, wr,
process and realtime edges; docs/results.md, "Cycle checks") from the raw
history, with plain dicts and full (not reduced) realtime order, and decides
for each of Elle's anomaly types whether the graph holds a cycle of that
type, by Elle's definitions (elle/txn.clj ``cycle-anomaly-specs``):

========================  =============================  ====================
anomaly                   edges a cycle may use          edges it must have
========================  =============================  ====================
G0                        ww                             -
G1c                       ww, wr                         wr
G0-process                ww, process                    process
G1c-process               ww, wr, process                wr and process
G0-realtime               ww, realtime                   realtime
G1c-realtime              ww, wr, realtime               wr and realtime
========================  =============================  ====================

An edge between two transactions may be several kinds at once; it can be
used as any of them.  Only for small histories: reachability is computed
from every vertex.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kafka_chaos.checkers.txn.cycle_checks import WR_CYCLE_CHECK, WR_CYCLE_TYPES

from testkit.reference_reads import expand, groups_of, reads_of
from testkit.reference_txn import completions

SPECS: dict[str, tuple[frozenset[str], tuple[frozenset[str], ...]]] = {
    "G0": (frozenset({"ww"}), ()),
    "G1c": (frozenset({"ww", "wr"}), (frozenset({"wr"}),)),
    "G0-process": (frozenset({"ww", "process"}), (frozenset({"process"}),)),
    "G1c-process": (
        frozenset({"ww", "wr", "process"}),
        (frozenset({"wr"}), frozenset({"process"})),
    ),
    "G0-realtime": (frozenset({"ww", "realtime"}), (frozenset({"realtime"}),)),
    "G1c-realtime": (
        frozenset({"ww", "wr", "realtime"}),
        (frozenset({"wr"}), frozenset({"realtime"})),
    ),
}

Edges = dict[tuple[int, int], set[str]]


def txn_graph(ops: list[dict[str, Any]], ww: bool = True, read_committed: bool = True) -> Edges:
    """(T1, T2) -> the kinds of edge from T1 to T2; transactions by invoke index.

    ``read_committed``: the run's isolation level, which decides whose reads
    prove that an unknown transaction committed (its reports then order its
    values in ww)."""
    invokes = {op["index"]: op for op in ops if op["f"] == "txn" and op["type"] == "invoke"}
    live = {
        txn: line for txn, line in completions(ops) if line["type"] in ("ok", "info")
    }  # transactions that may have committed
    edges: Edges = defaultdict(set)
    writer: dict[int, int] = {}
    at: dict[tuple, list[tuple[int, int, int]]] = defaultdict(list)  # tp -> (offset, value, txn)
    by_report = {}
    for txn, line in live.items():
        for m in line["value"]["ops"]:
            if m["f"] == "send" and not m.get("skipped"):
                writer[m["value"]] = txn
                if m.get("offset") is not None and m["offset"] >= 0:
                    by_report[m["value"]] = (m["topic"], m["partition"], m["offset"])
    flat = expand(ops)
    _, drain = groups_of(flat)
    read = {r["value"] for _, _, r in reads_of(flat)}
    # Reads by readers that promised committed data prove an unknown transaction committed.
    proof = {r["value"] for op, _, r in reads_of(flat) if read_committed or op["process"] in drain}
    committed = {txn for txn, line in live.items() if line["type"] == "ok"}
    committed |= {writer[v] for v in proof if v in writer}
    positions: dict[int, set] = defaultdict(set)
    for v, where in by_report.items():
        positions[v].add(where)
    for _, _, r in reads_of(flat):
        if r["value"] in writer:
            positions[r["value"]].add((r["topic"], r["partition"], r["offset"]))
    for v, where in positions.items():
        # A value seen at two places has no one version order; a report alone
        # places a committed version only if its transaction committed (an
        # unknown one's may name an aborted record).
        if len(where) == 1 and (v in read or writer[v] in committed):
            topic, part, off = next(iter(where))
            at[(topic, part)].append((off, v, writer[v]))
    if ww:
        for seq in at.values():
            seq.sort()
            for (_, _, t1), (_, _, t2) in zip(seq, seq[1:], strict=False):
                if t1 != t2:
                    edges[(t1, t2)].add("ww")
    for txn, line in live.items():
        for m in line["value"]["ops"]:
            if m["f"] != "poll" or m.get("skipped"):
                continue
            for r in m.get("records", []):
                src = writer.get(r["value"])
                if src is not None and src != txn:
                    edges[(src, txn)].add("wr")
    by_process: dict[Any, list[int]] = defaultdict(list)
    for txn in sorted(live):
        if live[txn]["type"] == "ok":  # Elle's process order: committed operations only
            by_process[invokes[txn]["process"]].append(txn)
    for seq in by_process.values():
        for t1, t2 in zip(seq, seq[1:], strict=False):
            edges[(t1, t2)].add("process")
    for t1, line in live.items():
        if line["type"] != "ok":
            continue  # an unknown outcome never completes, in Elle's realtime order
        for t2 in live:
            if t1 != t2 and line["time"] < invokes[t2]["time"]:
                edges[(t1, t2)].add("realtime")
    return edges


def _reach(edges: Edges, allowed: frozenset[str]) -> dict[int, set[int]]:
    """Vertex -> every vertex reachable from it (itself included) over ``allowed`` edges."""
    succ: dict[int, list[int]] = defaultdict(list)
    nodes = set()
    for (a, b), kinds in edges.items():
        nodes |= {a, b}
        if kinds & allowed:
            succ[a].append(b)
    out = {}
    for start in nodes:
        seen, stack = {start}, [start]
        while stack:
            for nxt in succ[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        out[start] = seen
    return out


# Elle's implications among these (elle.consistency-model ``implied-anomalies``):
# each type's ancestors, the types whose presence already implies it.
IMPLIED_BY: dict[str, set[str]] = {
    "G0": set(),
    "G1c": {"G0"},
    "G0-process": {"G0"},
    "G1c-process": {"G0", "G1c", "G0-process"},
    "G0-realtime": {"G0", "G0-process"},
    "G1c-realtime": {"G0", "G1c", "G0-process", "G1c-process", "G0-realtime"},
}


def reported(
    ops: list[dict[str, Any]], ww: bool = True, read_committed: bool = True
) -> dict[str, int]:
    """What Elle reports: per strongly connected component of the whole graph,
    each anomaly type that has a cycle there unless a type implying it has
    one too (Elle searches the worst first and skips what a find implies);
    counted in components.  With ww edges also G1c-wr, the cycles that need
    none: the G1c types reported without them, summed."""
    edges = txn_graph(ops, ww, read_committed)
    out: dict[str, int] = defaultdict(int)
    for part in cyclic_parts(edges):
        inside = {e: k for e, k in edges.items() if e[0] in part and e[1] in part}
        present = _present(inside)
        for name in present:
            if not present & IMPLIED_BY[name]:
                out[name] += 1
    if ww:
        wr_only = reported(ops, ww=False, read_committed=read_committed)
        if n := sum(wr_only.get(name, 0) for name in WR_CYCLE_TYPES):
            out[WR_CYCLE_CHECK] = n
    return dict(out)


def cyclic_parts(edges: Edges) -> list[frozenset[int]]:
    """Strongly connected components of two or more transactions, over every edge."""
    reach = _reach(edges, frozenset({"ww", "wr", "process", "realtime"}))
    parts = {frozenset(x for x in reach[v] if v in reach[x]) for v in reach}
    return [p for p in parts if len(p) >= 2]


def anomalies(ops: list[dict[str, Any]], ww: bool = True) -> set[str]:
    """The anomaly types (``SPECS``) whose cycles the history's graph holds."""
    return _present(txn_graph(ops, ww))


def _present(edges: Edges) -> set[str]:
    found = set()
    for name, (allowed, required) in SPECS.items():
        usable = {e: k & allowed for e, k in edges.items() if k & allowed}
        reach = _reach(usable, allowed)
        if not required:
            if any(a in reach.get(b, ()) for (a, b) in usable):
                found.add(name)
            continue
        first = [e for e, k in usable.items() if k & required[0]]
        if len(required) == 1:
            if any(a in reach.get(b, ()) for (a, b) in first):
                found.add(name)
            continue
        second = [e for e, k in usable.items() if k & required[1]]
        # One cycle through an edge of each required kind: e1, then a path to
        # e2, then a path back (e1 and e2 may be one edge of both kinds).
        if any(
            (e1 == e2)
            and a1 in reach.get(b1, ())
            or (e1 != e2 and a2 in reach.get(b1, ()) and a1 in reach.get(b2, ()))
            for e1 in first
            for e2 in second
            for (a1, b1), (a2, b2) in [(e1, e2)]
        ):
            found.add(name)
    return found
