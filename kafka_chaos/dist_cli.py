"""``kafka-chaos dist fetch VERSION...`` and ``kafka-chaos dist list``.

Fetching ahead of time keeps ``cluster up`` fast and offline-tolerant: the
first fetch of a version resolves it with Maven, later ones hit the cache.
"""

from __future__ import annotations

import argparse

from kafka_chaos.harness import distribution


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    dist = subparsers.add_parser("dist", help="Kafka distributions (Maven Central, cached)")
    sub = dist.add_subparsers(dest="dist_command", required=True, metavar="ACTION")
    fetch = sub.add_parser("fetch", help="assemble and cache Kafka versions")
    fetch.add_argument("versions", nargs="+", metavar="VERSION", help="e.g. 4.4.0 3.9.2")
    fetch.add_argument(
        "--timeout", type=float, default=distribution.MVN_TIMEOUT_S, help="seconds per version"
    )
    fetch.set_defaults(handler=_fetch)
    lst = sub.add_parser("list", help="show cached distributions")
    lst.set_defaults(handler=_list)


def _fetch(args: argparse.Namespace) -> int:
    for version in args.versions:
        dist = distribution.fetch(version, timeout_s=args.timeout)
        print(distribution.describe(dist))
    return 0


def _list(args: argparse.Namespace) -> int:
    found = distribution.list_cached()
    if not found:
        print(f"no distributions cached under {distribution.cache_root()}")
    for dist in found:
        print(distribution.describe(dist))
    return 0
