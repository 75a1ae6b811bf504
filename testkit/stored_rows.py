"""Stored history rows made comparable across chunkings.

Topic ids in the stored rows depend on how ingest cut the lines into chunks
(each chunk numbers the topics it meets), so tests that compare two sets of
rows compare them with the ids turned back into topic names.
"""

from __future__ import annotations

from typing import Any

TOPIC_LISTS = ("partitions", "assigned", "revoked", "offsets")


def topic_names(rows: list[dict[str, Any]]) -> dict[int, str]:
    """Topic id -> name, from the rows of kind ``topic``."""
    return {r["topic"]: r["name"] for r in rows if r["kind"] == "topic"}


def with_topic_names(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows other than ``topic`` ones, each topic id replaced by its name
    (the ``name`` column, used only by topic rows, dropped)."""
    names = topic_names(rows)
    return [_named(r, names) for r in rows if r["kind"] != "topic"]


def _named(row: dict[str, Any], names: dict[int, str]) -> dict[str, Any]:
    out = {**row, "topic": names.get(row["topic"])}
    del out["name"]
    if row["topics"] is not None:
        out["topics"] = [names[t] for t in row["topics"]]
    for key in TOPIC_LISTS:
        if row[key] is not None:
            out[key] = [{**item, "topic": names[item["topic"]]} for item in row[key]]
    return out
