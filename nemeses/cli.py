"""``kafka-chaos heal``: undo faults a run left behind (e.g. after a SIGKILLed harness)."""

from __future__ import annotations

import argparse

from harness.cluster import Cluster, home
from harness.errors import ConfigError


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "heal",
        help="remove partitions, resume paused and restart killed brokers",
        description=(
            "Heal a cluster: delete the iptables rules the nemesis tagged for it, clear netem "
            "qdiscs, SIGCONT paused brokers and start brokers that are down. With --all, "
            "every kafka-chaos-tagged rule on the nodes goes, whichever cluster tagged it."
        ),
    )
    p.add_argument("--name", help="cluster name (default: the only cluster, if there is one)")
    p.add_argument(
        "--all", action="store_true", help="also delete rules tagged by any other cluster"
    )
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="then wait up to this long for every broker to be back (default: don't wait)",
    )
    p.set_defaults(handler=_heal)


def _default_name() -> str:
    clusters = sorted(p.parent.name for p in (home() / "clusters").glob("*/cluster.json"))
    if len(clusters) == 1:
        return clusters[0]
    if not clusters:
        raise ConfigError(f"no clusters under {home() / 'clusters'}; nothing to heal")
    raise ConfigError(f"several clusters exist ({', '.join(clusters)}); choose one with --name")


def _heal(args: argparse.Namespace) -> int:
    from nemeses.runner import heal_cluster

    cluster = Cluster.load(args.name or _default_name())
    try:
        done = heal_cluster(cluster, every_tag=args.all)
        if args.wait > 0:
            from harness import kafka_db

            kafka_db.wait_healthy(cluster, timeout_s=args.wait)
    finally:
        cluster.close()
    for line in done:
        print(line)
    print(f"cluster {cluster.name!r} healed" + ("" if done else " (nothing needed undoing)"))
    return 0
