"""Every check's anomalies, collected in one Spark job.

Each check normalises its anomalies to (hid, check, sort key, example JSON)
(``checkers.tables.anomaly``); this unions them and keeps, per history and
check, the count and the first examples.  Every family of checks (queue,
transactional, share groups) collects through it, so it sits below them all.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

Found = dict[int, dict[str, tuple[int, list[dict[str, Any]]]]]


def union(frames: list[DataFrame]) -> DataFrame:
    """Every check's anomalies as one table of (hid, check, k, ex)."""
    allof = frames[0]
    for frame in frames[1:]:
        allof = allof.unionByName(frame)
    return allof


def collect_anomalies(frames: list[DataFrame], examples: int | None) -> Found:
    """{hid: {check: (count, first examples)}} in one Spark job."""
    allof = union(frames)
    part = Window.partitionBy("hid", "check")
    ranked = allof.select(
        "hid",
        "check",
        "ex",
        F.count(F.lit(1)).over(part).alias("n"),
        F.row_number().over(part.orderBy("k", "ex")).alias("rn"),
    )
    if examples is not None:
        ranked = ranked.where(F.col("rn") <= max(examples, 1))
    found: dict[int, dict[str, list]] = defaultdict(dict)
    for r in ranked.orderBy("hid", "check", "rn").collect():
        count, exs = found[r["hid"]].setdefault(r["check"], [r["n"], []])
        if examples is None or examples > 0:
            exs.append(json.loads(r["ex"]))
    return {h: {c: (v[0], v[1]) for c, v in checks.items()} for h, checks in found.items()}
