"""``kafka-chaos report RUN_DIR`` and ``kafka-chaos index [STORE_DIR]``.

Both only re-render from files on disk, so a report can be regenerated after
a template fix or after re-running the checkers, without a cluster.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kafka_chaos.harness.store import DEFAULT_STORE


def add_commands(sub: argparse._SubParsersAction) -> None:
    rep = sub.add_parser(
        "report",
        help="(re)write RUN_DIR/report.html from the run's files",
        description="Render the HTML safety report of one run directory. Missing inputs "
        "(results, cluster state, schedule, logs) appear as 'not available' sections.",
    )
    rep.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    rep.set_defaults(handler=_report)

    idx = sub.add_parser(
        "index",
        help="write STORE_DIR/index.html listing every run",
        description="Scan STORE_DIR/<test>/<timestamp>/ run directories and write an index "
        "page with verdicts, a verdict filter and anomaly trends per scenario.",
    )
    idx.add_argument("store_dir", type=Path, nargs="?", default=DEFAULT_STORE, metavar="STORE_DIR")
    idx.set_defaults(handler=_index)


def _report(args: argparse.Namespace) -> int:
    from kafka_chaos.reports.render import write_report

    print(write_report(args.run_dir))
    return 0


def _index(args: argparse.Namespace) -> int:
    from kafka_chaos.reports.index import write_index

    print(write_index(args.store_dir))
    return 0
