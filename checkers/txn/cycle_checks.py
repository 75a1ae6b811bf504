"""The cycle checks: G0, G1c and their -process/-realtime variants, by Elle.

Spark infers the transaction graph and its cyclic parts
(``checkers.txn.txn_graph``); Elle, in this process's JVM (``checkers.txn.elle``),
names and explains the cycles of each part.  A history without a cyclic
part never starts Elle's JVM.  With ww edges inferred, Elle searches the
same parts a second time without them: its G1c, G1c-process and
G1c-realtime there are G1c-wr.  Every cycle of that smaller graph is one of
the full graph, so no second graph is built.  Definitions and severities:
docs/results.md, "Cycle checks (Elle)".
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from kafka_chaos.checkers import hints, sources
from kafka_chaos.checkers.check import Basis, Check, Context, Findings, always
from kafka_chaos.checkers.collect import Found
from kafka_chaos.checkers.spec_view import CheckedSpec
from kafka_chaos.checkers.tables import Tables
from kafka_chaos.checkers.txn.txn_graph import component_data, graph
from kafka_chaos.harness.errors import ElleResolveError
from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

STEPS_SHOWN = 8  # edges of a cycle kept in an example
# Per anomaly type and strongly connected part (Jepsen uses 1 s): generous,
# since the machine may be busy, and a timeout leaves the checks it did not
# finish unknown rather than valid.
SEARCH_TIMEOUT_S = 5.0


@dataclass
class Cycles:
    """What the cycle search found, per history."""

    found: dict[int, dict[str, tuple[int, list[dict[str, Any]]]]] = field(default_factory=dict)
    unknown: str | None = None  # why no search could run (Elle missing)
    timeouts: int = 0  # parts whose search Elle gave up on: zero counts prove nothing there
    summary: dict[str, Any] = field(default_factory=dict)


def elle_missing() -> str | None:
    """None when Elle's classpath is (or can now be) resolved, else why not, in one line."""
    from kafka_chaos.harness.elle_classpath import classpath

    try:
        classpath()
    except ElleResolveError as e:
        return str(e)
    return None


def search(t: Tables, ww_deps: bool, examples: int | None) -> Cycles:
    """Every history's cycles, with up to ``examples`` explained examples per anomaly;
    ``ww_deps``: infer ww edges (off: Jepsen's --no-ww-deps)."""
    started = time.monotonic()
    txns, edges, parts = graph(t, ww=ww_deps)
    sizes = [len(p.txns) for p in parts]
    out = Cycles(
        summary={
            "ww_deps": ww_deps,
            "components": len(parts),
            "largest_component": max(sizes, default=0),
            "transactions_in_components": sum(sizes),
        }
    )
    missing = elle_missing()
    if missing:
        log.warning("cycle checks undecided: %s", missing)
        out.unknown = f"Elle is not available ({missing}), so cycles were not searched"
        out.summary["elle"] = out.unknown
        return out
    names = t.topic_names
    # One Elle call per history, with every cyclic part at once: Elle finds
    # the parts again itself, and one call costs far less than one per part
    # (222 parts of a 2e4-op history: 12.4 s one by one).
    per_history: dict[int, tuple[list, list]] = defaultdict(lambda: ([], []))
    # G1c-wr's search: the parts with a wr edge, without their ww edges.
    # Process and realtime order alone follow time, so a cycle needs a read.
    wr_history: dict[int, tuple[list, list]] = defaultdict(lambda: ([], []))
    for part, ops, links in component_data(txns, edges, parts):
        per_history[part.hid][0].extend(ops)
        per_history[part.hid][1].extend(links)
        reads = [e for e in links if e["kind"] == "wr"]
        if reads and ww_deps:
            wr_history[part.hid][0].extend(ops)
            wr_history[part.hid][1].extend(reads)
    found: dict[int, dict[str, list]] = {}
    wr_only: dict[int, dict[str, list]] = {}
    t0 = time.monotonic()
    for hid, (ops, links) in per_history.items():
        found[hid] = _elle(ops, links, names)
    for hid, (ops, links) in wr_history.items():
        wr_only[hid] = _elle(ops, links, names)
    elle_s = time.monotonic() - t0
    for hid, by_name in found.items():
        out.timeouts += len(by_name.get("cycle-search-timeout", []))
        out.found[hid] = {
            name: (len(cycles), [_example(c) for c in cycles[: examples or len(cycles)]])
            for name, cycles in by_name.items()
            if name in CYCLE_CHECKS
        }
    for hid, by_name in wr_only.items():
        # A timeout here leaves checks unknown as one in the full search does.
        out.timeouts += len(by_name.get("cycle-search-timeout", []))
        cycles = [(name, c) for name in WR_CYCLE_TYPES for c in by_name.get(name, [])]
        if cycles:
            shown = cycles[: examples or len(cycles)]
            out.found[hid][WR_CYCLE_CHECK] = (
                len(cycles),
                [{**_example(c), "type": name} for name, c in shown],
            )
    if out.timeouts:
        out.summary["search_timeouts"] = out.timeouts
        log.warning("Elle's cycle search timed out in %d part(s)", out.timeouts)
    out.summary.update(elle="ok", elle_seconds=round(elle_s, 3))
    out.summary["seconds"] = round(time.monotonic() - started, 3)
    return out


def _elle(
    ops: list[dict[str, Any]], links: list[dict[str, Any]], names: dict[int, str]
) -> dict[str, list]:
    """One component through Elle: its transactions as completions, its edges explained."""
    from kafka_chaos.checkers.txn.elle import find_cycles

    done = {o["txn"]: o["done_index"] for o in ops}
    elle_ops = [
        {
            "index": o["done_index"],
            "invoke_index": o["txn"],
            "time": o["done_time"],
            "invoke_time": o["invoke_time"],
            "process": o["process"],
            "type": o["type"],
        }
        for o in ops
    ]
    elle_edges = []
    for e in links:
        data = {"value": e["value"], "topic": names.get(e["topic"], e["topic"]),
                "partition": e["partition"], "offset": e["offset"]}  # fmt: skip
        if e["kind"] == "ww":
            data.update(next_value=e["next_value"], next_offset=e["next_offset"])
        elle_edges.append((done[e["src"]], done[e["dst"]], e["kind"], data))
    return find_cycles(elle_ops, elle_edges, search_timeout_s=SEARCH_TIMEOUT_S)


def _example(cycle: dict[str, Any]) -> dict[str, Any]:
    """A cycle as a results.json example: its transactions, edges and Elle's words."""
    steps = cycle.get("steps", [])
    return {
        "cycle": cycle.get("indices", []),
        "edges": [f"{s['kind']}: {s.get('text', '')}" for s in steps[:STEPS_SHOWN]],
        "explanation": cycle.get("text", ""),
        "indices": sorted(cycle.get("indices", [])),
    }


def g1c_severity(spec: CheckedSpec) -> str:
    """With ww edges inferred from offsets (which Kafka does not promise to be a
    serial order) G1c is legal, as it is where consumers read open transactions;
    from wr edges alone under read_committed it is an error."""
    return "info" if spec.ww_deps or not spec.read_committed else "error"


# The promise every G0 check enforces, and what the source allows: one record.
G0_BASIS = Basis(
    promise=sources.JEPSEN_G0,
    source=sources.JEPSEN_SOURCE + ": information only, Kafka does not isolate writes",
    url=sources.JEPSEN_KAFKA_URL,
    allows=("every cycle of ww edges: Kafka orders writes per partition only",),
)


G0 = Check(
    name="G0",
    family="cycles",
    title="Write cycle (G0)",
    explanation=(
        "A cycle of write-write dependencies: transactions whose writes to several partitions "
        "interleave in opposite orders. Kafka's transactions do not order writes across "
        "partitions, so this is allowed (as in Jepsen's Kafka test)."
    ),
    finds="a cycle of ww edges",
    severity_doc="info",
    meaning=(
        "Two or more transactions wrote to partitions in orders that contradict each other: T1's "
        "write precedes T2's in one partition and follows it in another. Kafka orders writes per "
        "partition only, so this is allowed (Jepsen's Kafka test allows it too)."
    ),
    causes="Concurrent transactional producers writing the same partitions.",
    # Kafka orders writes per partition only: ww cycles are legal.
    severity=always("info"),
    basis=G0_BASIS,
)

# Where G1c's rule comes from: read_committed, and the anomaly as Adya and Jepsen define it.
G1C_SOURCE = (
    sources.ISOLATION_SOURCE + "; G1c as Adya defines it and Jepsen's Kafka checker "
    "judges it (a cycle of reads needs a read of uncommitted data)"
)

# The promise every G1c check that rests on reads alone enforces: one record.
G1C_BASIS = Basis(
    promise=sources.READ_COMMITTED,
    source=G1C_SOURCE,
    url=sources.CONSUMER_CONFIG_URL,
    allows=(
        "cycles through ww edges inferred from offsets (`checker.ww_deps`, the default): "
        "Kafka does not isolate writes (info)",
        "every such cycle under read_uncommitted (info)",
    ),
)


G1C = Check(
    name="G1c",
    family="cycles",
    title="Circular information flow (G1c)",
    explanation=(
        "A cycle of write-write and write-read dependencies (at least one read): T1 wrote before "
        "T2 in some partition, and T1 read what T2 wrote. Allowed while ww edges are inferred from"
        " offset order (which Kafka does not promise to be a serial order); an error when only wr "
        "edges are used (--no-ww-deps)."
    ),
    finds="a cycle with at least one wr edge, ww edges allowed",
    severity_doc=(
        "info with ww edges (`checker.ww_deps`, the default); without them (`--no-ww-deps`) error "
        "under `read_committed`, info under `read_uncommitted`"
    ),
    meaning=(
        "Transactions depend on each other in a cycle of writes and reads: one wrote before the "
        "other in a partition, and read what the other wrote. With ww order inferred from offsets "
        "this is allowed; with --no-ww-deps (reads only) it is an error."
    ),
    causes="Concurrent transactions interleaving in partitions while reading each other's data.",
    severity=g1c_severity,
    basis=G1C_BASIS,
)

G0_PROCESS = Check(
    name="G0-process",
    family="cycles",
    title="Write cycle with process order (G0-process)",
    explanation="A G0 cycle that also needs one process's own order of transactions.",
    finds="a cycle of ww edges and one process's order of its transactions",
    severity_doc="info",
    meaning="A write cycle that also uses one client process's own order of transactions.",
    causes="Concurrent producers; a process's later transaction ordered before its earlier one.",
    # Kafka orders writes per partition only: ww cycles are legal.
    severity=always("info"),
    basis=G0_BASIS,
)

G1C_PROCESS = Check(
    name="G1c-process",
    family="cycles",
    title="Circular information flow with process order (G1c-process)",
    explanation=(
        "A G1c cycle that also needs one process's own order of transactions: a process read, in a"
        " later transaction, data that depends on its own future writes."
    ),
    finds=(
        "a cycle with at least one wr edge, ww edges allowed, and one process's order of its "
        "transactions"
    ),
    severity_doc=(
        "info with ww edges (`checker.ww_deps`, the default); without them (`--no-ww-deps`) error "
        "under `read_committed`, info under `read_uncommitted`"
    ),
    meaning="A G1c cycle that also needs one process's own order of transactions.",
    causes="A consumer returning data that depends on its own process's later writes.",
    severity=g1c_severity,
    basis=G1C_BASIS,
)

G0_REALTIME = Check(
    name="G0-realtime",
    family="cycles",
    title="Write cycle with real-time order (G0-realtime)",
    explanation=(
        "A G0 cycle that also needs real-time order: a transaction that began after another "
        "committed is ordered before it."
    ),
    finds="a cycle of ww edges and real-time order",
    severity_doc="info",
    meaning=(
        "A write cycle that also needs real time: a transaction that began after another committed"
        " is ordered before it by the log."
    ),
    causes=(
        "Writes of a committed transaction landing after those of a later one (delayed produce "
        "requests, KAFKA-17754)."
    ),
    # Kafka orders writes per partition only: ww cycles are legal.
    severity=always("info"),
    basis=G0_BASIS,
)

G1C_REALTIME = Check(
    name="G1c-realtime",
    family="cycles",
    title="Circular information flow with real-time order (G1c-realtime)",
    explanation=(
        "A G1c cycle that also needs real-time order: a transaction depends on one that began only"
        " after it committed."
    ),
    finds="a cycle with at least one wr edge, ww edges allowed, and real-time order",
    severity_doc=(
        "info with ww edges (`checker.ww_deps`, the default); without them (`--no-ww-deps`) error "
        "under `read_committed`, info under `read_uncommitted`"
    ),
    meaning=(
        "A G1c cycle that also needs real time: a transaction read data that depends on a "
        "transaction that began only after it committed."
    ),
    causes="Stale or future reads across a leader change; delayed writes (KAFKA-17754).",
    severity=g1c_severity,
    basis=G1C_BASIS,
)

G1C_WR = Check(
    name="G1c-wr",
    family="cycles",
    title="Circular information flow through reads alone (G1c-wr)",
    explanation=(
        "A dependency cycle that needs no write-write edge: only reads (T2 polled a value T1 "
        "sent), possibly with one process's order or real time, e.g. two transactions each reading"
        " the other's writes before either committed. Reported while ww edges are inferred (G1c "
        "and its variants are allowed then); it is what --no-ww-deps calls G1c, G1c-process or "
        "G1c-realtime, and an error whatever ww_deps says."
    ),
    finds=(
        "(only with ww edges) "
        "a cycle that needs no ww edge: what `--no-ww-deps` reports as G1c, G1c-process or "
        "G1c-realtime; each example says which (`type`)"
    ),
    severity_doc="error under `read_committed`; info under `read_uncommitted`",
    meaning=(
        "Transactions depend on each other in a cycle that needs no inferred write order: only "
        "reads (one polled what the other sent), perhaps with a process's order or real time. E.g."
        " two transactions each read the other's writes before either committed. G1c is allowed "
        "while ww order is inferred from offsets; this cycle is not, so it is an error (what "
        "--no-ww-deps reports as G1c, G1c-process or G1c-realtime)."
    ),
    causes=(
        "Uncommitted data shown to read_committed consumers (a last stable offset served too high,"
        " e.g. across a leader or coordinator change); under read_uncommitted, consumers that read"
        " each other's open transactions."
    ),
    severity=lambda spec: "error" if spec.read_committed else "info",
    applies=lambda spec: spec.ww_deps,
    basis=Basis(
        promise=sources.READ_COMMITTED,
        source=G1C_SOURCE,
        url=sources.CONSUMER_CONFIG_URL,
        allows=("every such cycle under read_uncommitted (info)",),
    ),
    hints=(hints.read_uncommitted,),
)

# Elle's names of the cycles the full search reports (G1c-wr is the second search's).
CYCLE_CHECKS = ("G0", "G1c", "G0-process", "G1c-process", "G0-realtime", "G1c-realtime")
WR_CYCLE_CHECK = G1C_WR.name
# What --no-ww-deps calls these, the search without ww edges reports as G1c-wr.
WR_CYCLE_TYPES = ("G1c", "G1c-process", "G1c-realtime")


class CycleFamily:
    """Elle's dependency cycles between transactions: found by a search, not by frames."""

    name = "cycles"
    checks = (G0, G1C, G0_PROCESS, G1C_PROCESS, G0_REALTIME, G1C_REALTIME, G1C_WR)

    def applies(self, spec: CheckedSpec) -> bool:
        return True

    def frames(self, ctx: Context) -> list[DataFrame]:
        return []

    def findings(self, ctx: Context, found: Found) -> Findings:
        if ctx.cycles and ctx.spec.spec.checker.cycles:
            searched = search(ctx.t, ctx.spec.ww_deps, ctx.examples)
        else:
            searched = Cycles(unknown="the cycle search was turned off (checker.cycles)")
        names = [c.name for c in self.checks if c.applies(ctx.spec)]
        undecided: dict[int | None, dict[str, Any]] = {}
        if searched.unknown:
            undecided[None] = {n: {"valid": "unknown", "reason": searched.unknown} for n in names}
        elif searched.timeouts:  # what the search did not finish proves nothing
            reason = f"Elle's search timed out in {searched.timeouts} part(s) of the graph"
            for hid in ctx.meta:
                counts = searched.found.get(hid, {})
                undecided[hid] = {
                    n: {"valid": "unknown", "reason": reason}
                    for n in names
                    if not counts.get(n, (0, []))[0]
                }
        return Findings(
            found=searched.found, fields=undecided, sections={None: {"cycles": searched.summary}}
        )


CYCLES = CycleFamily()
