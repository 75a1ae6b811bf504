"""Group a check's anomalies that form a run of consecutive offsets into one range.

"offsets 1648–5077 of partition 0: acknowledged with one value, now holding
another (3,430 values)" says what ten near-identical examples cannot.  The
ranges come from the checker (``ranges`` in results.json, over every
anomaly); older results without them are grouped from their examples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafka_chaos.checkers import catalog


def mechanism(check: str, examples: list[dict[str, Any]]) -> str:
    """What one anomaly of ``check`` is, in a few words, from its record in the
    catalog (``Check.mechanism``); a check the catalog does not know shows its name."""
    found = catalog.find(check)
    return found.mechanism_of(examples) if found is not None else check


@dataclass
class Range:
    topic: Any
    partition: int
    first: int
    last: int
    count: int
    examples: list[Any] = field(default_factory=list)  # the example views inside it

    def label(self, one_topic: bool) -> str:
        where = f"partition {self.partition}" if one_topic else f"{self.topic}/{self.partition}"
        return f"offsets {self.first}–{self.last} of {where}"


def _place(ex: dict[str, Any]) -> tuple[Any, int, int] | None:
    p, o = ex.get("partition"), ex.get("offset")
    if isinstance(p, int) and isinstance(o, int) and not isinstance(o, bool):
        return ex.get("topic"), p, o
    return None


def ranges_of_examples(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs of consecutive offsets among the examples themselves (results without ranges)."""
    places = sorted({pl for ex in examples if (pl := _place(ex)) is not None}, key=str)
    out: list[dict[str, Any]] = []
    for topic, p, o in sorted(places, key=lambda x: (str(x[0]), x[1], x[2])):
        last = out[-1] if out else None
        if last and (last["topic"], last["partition"]) == (topic, p) and o == last["last"] + 1:
            last["last"], last["count"] = o, last["count"] + 1
        else:
            out.append({"topic": topic, "partition": p, "first": o, "last": o, "count": 1})
    return out


def group(
    check: dict[str, Any], examples: list[dict[str, Any]], views: list[Any]
) -> tuple[list[Range], list[Any]]:
    """(ranges of two or more anomalies, each holding its example views; the other views).

    ``examples`` are results.json's raw examples and ``views`` their rendered
    views, in the same order.
    """
    raw = check.get("ranges")
    found = raw if isinstance(raw, list) else ranges_of_examples(examples)
    ranges = [
        Range(r["topic"], r["partition"], r["first"], r["last"], r["count"])
        for r in found
        if isinstance(r, dict) and isinstance(r.get("count"), int) and r["count"] >= 2
    ]
    rest = []
    for ex, view in zip(examples, views, strict=True):
        place = _place(ex)
        home = next(
            (
                r
                for r in ranges
                if place is not None
                and (r.topic, r.partition) == place[:2]
                and r.first <= place[2] <= r.last
            ),
            None,
        )
        (home.examples if home else rest).append(view)
    return ranges, rest
