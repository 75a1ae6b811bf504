"""``kafka-chaos elle fetch``: resolve Elle's classpath and compile Elle, ahead of time.

Elle is on Clojars only; fetching it in setup.sh means a check never waits on
Maven, and a machine that cannot reach Clojars learns so at setup, in one line.
The fetch also starts Elle's JVM once, which compiles Elle into the cache, so
a check's first cycle search starts in about 2 s instead of 5-12 s.
"""

from __future__ import annotations

import argparse

from kafka_chaos.checkers.txn import elle_jvm
from kafka_chaos.harness import elle_classpath


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    elle = subparsers.add_parser("elle", help="Elle cycle checker (Clojars, cached)")
    sub = elle.add_subparsers(dest="elle_command", required=True, metavar="ACTION")
    fetch = sub.add_parser(
        "fetch",
        help="resolve and cache Elle's classpath, and compile Elle into the cache",
        description=(
            "Resolve Elle's jars with mvn from Maven Central, Clojars and the "
            f"repositories in ${elle_classpath.EXTRA_REPOS_ENV}."
        ),
    )
    fetch.add_argument("--version", default=elle_classpath.ELLE_VERSION, help="Elle version")
    fetch.add_argument(
        "--timeout", type=float, default=elle_classpath.MVN_TIMEOUT_S, help="seconds for mvn"
    )
    fetch.add_argument(
        "--no-compile", action="store_true", help="only resolve the classpath; start no JVM"
    )
    fetch.set_defaults(handler=_fetch)


def _fetch(args: argparse.Namespace) -> int:
    jars = elle_classpath.classpath(args.version, timeout_s=args.timeout)
    print(elle_classpath.describe(jars, args.version))
    if args.no_compile or args.version != elle_classpath.ELLE_VERSION:
        return 0  # the JVM always loads the default version
    elle_jvm.clojure()  # logs how long the start took, and whether it compiled
    return 0
