"""What each part of a check costs: the shared tables, then every check's
anomalies, then the cycle search's graph, each computed and timed on its own.

    python bench/check_parts.py HISTORY [--config CONFIG_JSON]

A real check plans every check into one Spark job (``checkers.api``), so
Spark's own figures cannot say which check a slow stage serves; here each
part is forced alone (``count()``), in the order a check builds them, and
its seconds are printed as soon as it ends.  The shared tables are cached
first, so a check's figure is its own work.  Figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka_chaos.checkers import catalog, frames
from kafka_chaos.checkers.check import Context
from kafka_chaos.checkers.ingest.load import expected_ops, read_rows, rows_dir
from kafka_chaos.checkers.queue import (
    commit_checks,
    group_checks,
    loss_checks,
    poll_checks,
    queue_checks,
    send_checks,
)
from kafka_chaos.checkers.queue.queue_tables import QueueTables
from kafka_chaos.checkers.session import get_spark
from kafka_chaos.checkers.spec_view import CheckedSpec
from kafka_chaos.checkers.tables import Tables
from kafka_chaos.checkers.txn import txn_checks

_MODULES = (send_checks, poll_checks, group_checks, commit_checks, txn_checks, loss_checks)


def timed(label: str, work: Callable[[], object]) -> object:
    t0 = time.monotonic()
    out = work()
    print(f"  {time.monotonic() - t0:7.1f} s  {label}", flush=True)
    return out


def named_anomalies() -> None:
    """Make every check module's ``anomaly`` tag its frame with the check's name (and
    a frame of several checks, ``frames.anomalies``, with all their names)."""
    original = frames.anomaly

    def tagged(df, check, *args, **kwargs):
        frame = original(df, check, *args, **kwargs)
        frame.kc_check = check
        return frame

    for module in _MODULES:
        module.anomaly = tagged
    fused = frames.anomalies

    def tagged_fused(df, *branches):
        frame = fused(df, *branches)
        frame.kc_check = "+".join(b.check for b in branches)
        return frame

    queue_checks.anomalies = tagged_fused


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("history", type=Path)
    ap.add_argument("--config", type=Path)
    args = ap.parse_args()
    config = json.loads(args.config.read_text()) if args.config else {}
    named_anomalies()
    t0 = time.monotonic()
    rows = timed("rows table (Parquet cache)", lambda: rows_dir(args.history))
    spark = timed("Spark session", lambda: get_spark(None, expected_ops(args.history)))
    spec = CheckedSpec.of(config)
    t = Tables(read_rows(spark, rows), read_committed=spec.read_committed)
    print("shared tables:", flush=True)
    queue = QueueTables.of(t)
    for name in (
        "control",
        "polls",
        "per_value",
        "per_position",
        "partitions",
        "members",
        "per_second",
        "meta",
    ):
        timed(name, lambda name=name: getattr(t, name).count())
    for name in ("commits", "member_ops"):
        timed(name, lambda name=name: getattr(queue, name).count())
    print("checks (rows found):", flush=True)
    timed("suspicious pairs", lambda: poll_checks.suspicious_pairs(t).count())
    ctx = Context(spark, t, spec, examples=10)
    check_frames = [f for family in catalog.families_for(spec) for f in family.frames(ctx)]
    for frame in check_frames:
        n = [0]
        timed(getattr(frame, "kc_check", "?"), lambda f=frame, n=n: n.__setitem__(0, f.count()))
        print(f"             {n[0]} found", flush=True)
    if any(f.name == "cycles" for f in catalog.families_for(spec)):
        from kafka_chaos.checkers.txn import txn_graph

        print("cycle search graph:", flush=True)
        txns = t.keep(txn_graph.transactions(t), small=True)
        timed("transactions", txns.count)
        timed("wr edges", txn_graph.wr_edges(t).count)
        timed("ww edges", txn_graph.ww_edges(t).count)
        timed("order edges", txn_graph.order_edges(txns).count)
        timed("whole graph + components", lambda: txn_graph.graph(t))
    print(f"{time.monotonic() - t0:.1f} s in all", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
