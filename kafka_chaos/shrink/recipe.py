"""A failing run's recipe, and the smaller recipes one cut away from it.

A recipe is what a run does, as far as shrinking may change it: the run's
options (``TestSpec.to_dict()``) with its fault schedule written into
``nemesis.schedule``.  Running a recipe is ``run --replay`` of exactly that.

Cuts come largest first (delta debugging, Zeller's ddmin): half the faults,
then a quarter, then one; the time limit ended right after the last fault
kept; then halving durations, the time limit, the rate, the clients, the
partitions, consumer crashes and transaction sizes.  Each cut changes one
thing, so a log of kept cuts reads as the recipe's story.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

END_MARGIN_S = 10.0  # a run cut to its last fault still runs this long after the heal
MIN_TIME_S = 10.0
MIN_FAULT_S = 1.0


@dataclass(frozen=True)
class Recipe:
    options: dict[str, Any]  # TestSpec.to_dict(), nemesis.schedule the ops to replay

    @classmethod
    def of(cls, options: dict[str, Any], ops: list[dict[str, Any]]) -> Recipe:
        """The recipe of a recorded run: its options with its schedule to replay."""
        options = copy.deepcopy(options)
        options.setdefault("nemesis", {})["schedule"] = [_plan(op) for op in ops]
        return cls(options)

    @property
    def faults(self) -> list[dict[str, Any]]:
        return list(self.options["nemesis"]["schedule"])

    @property
    def time_limit_s(self) -> float:
        return float(self.options["time_limit_s"])

    def key(self) -> str:
        """Equal recipes, equal keys: a judged recipe is never run again."""
        text = json.dumps(_without_name(self.options), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def size(self) -> dict[str, float]:
        """What shrinking makes smaller: faults, seconds, and operations (sends planned)."""
        o = self.options
        return {
            "faults": len(self.faults),
            "seconds": self.time_limit_s,
            "operations": round(o["producer"]["rate"] * self.time_limit_s),
        }

    def with_(self, **changes: Any) -> Recipe:
        """A copy with dotted paths changed: ``with_(**{"producer.rate": 100})``."""
        options = copy.deepcopy(self.options)
        for dotted, value in changes.items():
            *parents, leaf = dotted.split(".")
            node = options
            for part in parents:
                node = node[part]
            node[leaf] = value
        return Recipe(options)


def _plan(op: dict[str, Any]) -> dict[str, Any]:
    """A recorded op as a plan to replay: when, what, for how long, on whom."""
    # started_s/applied_s: how long applying it took in the source run (replay clears them)
    keep = (
        "at_s",
        "duration_s",
        "f",
        "id",
        "params",
        "target",
        "targets",
        "started_s",
        "applied_s",
    )
    return {k: copy.deepcopy(op[k]) for k in keep if k in op}


def _without_name(options: dict[str, Any]) -> dict[str, Any]:
    out = dict(options)
    out.pop("name", None)
    return out


def cuts(recipe: Recipe, kinds: tuple[str, ...] = ()) -> Iterator[tuple[str, Recipe]]:
    """Every one-change smaller recipe, largest cut first, each with what it cut.

    ``kinds`` (of ``CUT_KINDS``) keeps only those families: a user who knows
    the fault is needed, or the load is, need not spend runs proving it.
    """
    for kind in CUT_KINDS:
        if not kinds or kind in kinds:
            yield from _CUTS[kind](recipe)


def _fault_cuts(recipe: Recipe) -> Iterator[tuple[str, Recipe]]:
    """ddmin over the fault list: drop chunks of half, a quarter, ... one fault."""
    faults = recipe.faults
    n = len(faults)
    chunk = max(1, n // 2)
    seen: set[tuple[int, ...]] = set()
    while True:
        for start in range(0, n, chunk):
            dropped = tuple(range(start, min(n, start + chunk)))
            if dropped in seen or len(dropped) == 0:
                continue
            seen.add(dropped)
            kept = [f for i, f in enumerate(faults) if i not in dropped]
            what = f"drop fault(s) {', '.join(_fault_name(faults[i]) for i in dropped)}"
            yield what, recipe.with_(**{"nemesis.schedule": kept})
        if chunk == 1:
            return
        chunk = max(1, chunk // 2)


def _fault_name(op: dict[str, Any]) -> str:
    return f"#{op.get('id', '?')} {op.get('f', '?')} at {op.get('at_s', 0):g}s"


def _time_cuts(recipe: Recipe) -> Iterator[tuple[str, Recipe]]:
    """End right after the last fault heals; then halve the time limit."""
    limit = recipe.time_limit_s
    faults = recipe.faults
    last_heal = max((f["at_s"] + f.get("duration_s", 0) for f in faults), default=0.0)
    end = max(MIN_TIME_S, last_heal + END_MARGIN_S)
    if end < limit:
        yield (
            f"end the run at {end:g}s, {END_MARGIN_S:g}s after the last heal",
            recipe.with_(time_limit_s=end),
        )
    half = max(MIN_TIME_S, last_heal, limit / 2)
    if half < limit and half != end:
        yield f"halve the time limit to {half:g}s", recipe.with_(time_limit_s=half)


def _duration_cuts(recipe: Recipe) -> Iterator[tuple[str, Recipe]]:
    """Halve one fault's duration, never below what applying it took in the source run:
    a scripted fault (unclean-election waits for the ISR to shrink) that is still being
    applied when its heal is due heals late, or after the run has ended."""
    faults = recipe.faults
    for i, f in enumerate(faults):
        d = f.get("duration_s", 0)
        applying = (f.get("applied_s") or 0) - (f.get("started_s") or 0)
        if d / 2 >= max(MIN_FAULT_S, applying):
            shorter = [dict(g) for g in faults]
            shorter[i]["duration_s"] = d / 2
            yield (
                f"halve fault {_fault_name(f)}'s duration to {d / 2:g}s",
                recipe.with_(**{"nemesis.schedule": shorter}),
            )


def _load_cuts(recipe: Recipe) -> Iterator[tuple[str, Recipe]]:
    """Fewer clients, partitions, crashes, a lower rate, smaller transactions."""
    o = recipe.options
    c, p, t, txn = o["consumer"], o["producer"], o["topic"], o.get("txn", {})
    if c.get("crash_interval_s"):
        yield "no consumer crashes", recipe.with_(**{"consumer.crash_interval_s": None})
        yield (
            f"consumer crashes half as often ({c['crash_interval_s'] * 2:g}s)",
            recipe.with_(**{"consumer.crash_interval_s": c["crash_interval_s"] * 2}),
        )
    halvable = (
        ("producer.rate", p["rate"], 10),
        ("producer.workers", p["workers"], 1),
        ("consumer.workers_per_group", c["workers_per_group"], 1),
        ("consumer.groups", c["groups"], 1),
        ("topic.partitions", t["partitions"], 1),
        ("txn.processes", txn.get("processes", 1), 1),
        ("txn.max_ops", txn.get("max_ops", 1), 1),
    )
    for path, value, floor in halvable:
        smaller = max(floor, value // 2 if isinstance(value, int) else value / 2)
        if smaller < value:
            yield f"halve {path} to {smaller:g}", recipe.with_(**{path: smaller})


_CUTS = {
    "faults": _fault_cuts,
    "time": _time_cuts,
    "durations": _duration_cuts,
    "load": _load_cuts,
}
CUT_KINDS = tuple(_CUTS)  # largest first
