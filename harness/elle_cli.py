"""``kafka-chaos elle fetch``: resolve and cache Elle's classpath ahead of time.

Elle is on Clojars only; fetching it in setup.sh means a check never waits on
Maven, and a machine that cannot reach Clojars learns so at setup, in one line.
"""

from __future__ import annotations

import argparse

from harness import elle_classpath


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    elle = subparsers.add_parser("elle", help="Elle cycle checker (Clojars, cached)")
    sub = elle.add_subparsers(dest="elle_command", required=True, metavar="ACTION")
    fetch = sub.add_parser(
        "fetch",
        help="resolve and cache Elle's classpath",
        description=(
            "Resolve Elle's jars with mvn from Maven Central, Clojars and the "
            f"repositories in ${elle_classpath.EXTRA_REPOS_ENV}."
        ),
    )
    fetch.add_argument("--version", default=elle_classpath.ELLE_VERSION, help="Elle version")
    fetch.add_argument(
        "--timeout", type=float, default=elle_classpath.MVN_TIMEOUT_S, help="seconds for mvn"
    )
    fetch.set_defaults(handler=_fetch)


def _fetch(args: argparse.Namespace) -> int:
    jars = elle_classpath.classpath(args.version, timeout_s=args.timeout)
    print(elle_classpath.describe(jars, args.version))
    return 0
