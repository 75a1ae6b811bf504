"""The cycle checks: G0, G1c and their -process/-realtime variants, by Elle.

Spark infers the transaction graph and its cyclic parts
(``checkers.txn_graph``); Elle, in this process's JVM (``checkers.elle``),
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

from checkers.results import CYCLE_CHECKS, WR_CYCLE_CHECK, WR_CYCLE_TYPES, ww_deps
from checkers.tables import Tables
from checkers.txn_graph import component_data, graph
from harness.errors import ElleResolveError

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
    from harness.elle_classpath import classpath

    try:
        classpath()
    except ElleResolveError as e:
        return str(e)
    return None


def search(t: Tables, config: dict[str, Any], examples: int | None) -> Cycles:
    """Every history's cycles, with up to ``examples`` explained examples per anomaly."""
    started = time.monotonic()
    txns, edges, parts = graph(t, ww=ww_deps(config))
    sizes = [len(p.txns) for p in parts]
    out = Cycles(
        summary={
            "ww_deps": ww_deps(config),
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
        if reads and ww_deps(config):
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
    from checkers.elle import find_cycles

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
