"""``kafka-chaos heal``: undo faults a run left behind (e.g. after a SIGKILLed harness)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kafka_chaos.harness.cluster import Cluster, home
from kafka_chaos.harness.errors import ConfigError


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "heal",
        help="remove partitions, reset clocks, resume paused and restart killed brokers",
        description=(
            "Heal a cluster: delete the iptables rules the nemesis tagged for it, clear netem "
            "qdiscs, stop clock strobes and put every node's clock back to true time, SIGCONT "
            "paused brokers and start brokers that are down. With --all, "
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

    s = sub.add_parser(
        "schedule",
        help="print the fault schedule a seed gives, without running anything",
        description=(
            "Generate the fault schedule a run with these options would use (same seed, same "
            "schedule), or show a recorded schedule.json. Nothing touches a cluster."
        ),
    )
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--faults", default="kill,partition", help="comma-separated fault kinds")
    s.add_argument("--fault-interval", type=float, default=10.0, help="quiet seconds between")
    s.add_argument("--fault-duration", type=float, default=8.0, help="seconds each fault lasts")
    s.add_argument("--targets", default="random", help="random | leader | controller")
    s.add_argument("--time-limit", type=float, default=60.0)
    s.add_argument("--nodes", type=int, default=3, help="nodes n1..nN")
    s.add_argument("--topic", default="chaos", help="topic for leader targeting")
    s.add_argument("--file", type=Path, help="show this schedule.json instead of generating")
    s.add_argument("--json", action="store_true", help="print schedule.json content")
    s.set_defaults(handler=_schedule)


def _default_name() -> str:
    clusters = sorted(p.parent.name for p in (home() / "clusters").glob("*/cluster.json"))
    if len(clusters) == 1:
        return clusters[0]
    if not clusters:
        raise ConfigError(f"no clusters under {home() / 'clusters'}; nothing to heal")
    raise ConfigError(f"several clusters exist ({', '.join(clusters)}); choose one with --name")


def _heal(args: argparse.Namespace) -> int:
    """Heal the cluster, and its disaster-recovery pair (dc2, the MirrorMaker node) if it
    has one: a mirror run killed mid-fault may leave MirrorMaker paused."""
    from kafka_chaos.harness.backends import cluster_exists
    from kafka_chaos.harness.mirror_pair import dc2_name, mm_name
    from kafka_chaos.nemeses.runner import heal_cluster

    name = args.name or _default_name()
    for member in (name, dc2_name(name), mm_name(name)):
        if member != name and not cluster_exists(member):
            continue
        cluster = Cluster.load(member)
        try:
            done = heal_cluster(cluster, every_tag=args.all)
            if args.wait > 0 and member == name:
                from kafka_chaos.harness import kafka_db

                kafka_db.wait_healthy(cluster, timeout_s=args.wait)
        finally:
            cluster.close()
        for line in done:
            print(line)
        print(f"cluster {cluster.name!r} healed" + ("" if done else " (nothing needed undoing)"))
    return 0


def _schedule(args: argparse.Namespace) -> int:
    from kafka_chaos.harness.spec import NemesisSpec
    from kafka_chaos.nemeses.schedule import Schedule, generate

    if args.file:
        sched = Schedule.load(args.file)
    else:
        if args.nodes < 1:
            raise ConfigError(f"--nodes: need at least 1 node, got {args.nodes}")
        spec = NemesisSpec(
            faults=[f.strip() for f in args.faults.split(",") if f.strip()],
            interval_s=args.fault_interval,
            duration_s=args.fault_duration,
            targets=args.targets,
        )
        nodes = [f"n{i}" for i in range(1, args.nodes + 1)]
        sched = generate(spec, nodes, args.time_limit, args.seed, args.topic)
    if args.json:
        print(json.dumps(sched.to_dict(), indent=2, sort_keys=True))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"fault schedule (seed {sched.seed})")
    for col in ("id", "at s", "f", "targets", "lasts s", "params"):
        table.add_column(col)
    for op in sched.ops:
        table.add_row(
            str(op.id),
            f"{op.at_s:.3f}",
            op.f,
            ",".join(op.targets) or f"<{op.target}>",
            f"{op.duration_s:g}",
            json.dumps(op.params, sort_keys=True) if op.params else "",
        )
    Console(width=160).print(table)
    return 0
