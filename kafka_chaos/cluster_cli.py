"""``kafka-chaos cluster up|status|down``: manage a cluster by hand.

Nodes come from the backends facade; Kafka on them from ``harness.kafka_db``
and its state from ``harness.admin``.  Those two are imported when used so
that the node-only commands keep working on an install without them.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import os
import threading
import time
from types import ModuleType
from typing import Any

from rich.console import Console
from rich.table import Table

from kafka_chaos.harness import backends, broker
from kafka_chaos.harness.backends.health import node_processes, probe_nodes
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.lazyfs import DISKS
from kafka_chaos.harness.spec import NEWEST_KAFKA, SUPPORTED_KAFKA, ClusterSpec

log = logging.getLogger(__name__)

STOP_KAFKA_TIMEOUT_S = 10.0  # per broker; teardown SIGKILLs whatever is left
ADMIN_TIMEOUT_S = 10.0


def add_commands(subparsers: Any) -> None:
    parser = subparsers.add_parser("cluster", help="bring a cluster up, inspect it, tear it down")
    sub = parser.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")

    up = sub.add_parser("up", help="create (or reuse) a cluster and start Kafka on it")
    _name_arg(up)
    up.add_argument("--nodes", type=int, default=3, help="node count (default 3)")
    up.add_argument(
        "--kafka-version",
        default=NEWEST_KAFKA,
        help=f"Kafka version ({', '.join(SUPPORTED_KAFKA)}; default {NEWEST_KAFKA})",
    )
    up.add_argument("--mode", choices=("kraft", "zk"), default="kraft", help="default kraft")
    up.add_argument(
        "--broker",
        default="kafka",
        help="broker implementation: kafka (Apache Kafka, default) or tansu (docs/brokers.md)",
    )
    up.add_argument("--backend", choices=backends.BACKENDS, default="local", help="default local")
    up.add_argument("--inventory", help="ssh backend: TOML or YAML inventory of hosts")
    up.add_argument("--vagrant-dir", help="vagrant backend: directory holding the Vagrantfile")
    up.add_argument("--kafka-tarball", help="an official Kafka .tgz instead of Maven Central")
    up.add_argument(
        "--disk",
        choices=DISKS,
        default="plain",
        help="broker data on the host disk (default), on lazyfs (power-loss drops its "
        "unsynced writes) or on a size-limited tmpfs (disk-full fills it; KC_TMPFS_MB, "
        "default 512); local backend only",
    )
    up.add_argument(
        "--no-kafka", action="store_true", help="provision the nodes only, do not start Kafka"
    )
    up.add_argument(
        "--mirror",
        type=int,
        metavar="DC2_NODES",
        help="also a disaster-recovery pair: a second cluster <name>-dc2 of DC2_NODES nodes and "
        "a MirrorMaker node <name>-mm (docs/mirror.md)",
    )
    up.set_defaults(handler=cmd_up)

    status = sub.add_parser("status", help="nodes, processes, controller, partition leaders")
    _name_arg(status)
    status.set_defaults(handler=cmd_status)

    down = sub.add_parser("down", help="stop Kafka and remove everything of a cluster")
    group = down.add_mutually_exclusive_group()
    group.add_argument("--name", default="default", help="cluster name (default: default)")
    group.add_argument("--all", action="store_true", help="every cluster under KAFKA_CHAOS_HOME")
    down.set_defaults(handler=cmd_down)


def _name_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", default="default", help="cluster name (default: default)")


def spec_from_args(args: argparse.Namespace) -> ClusterSpec:
    """The ClusterSpec a ``cluster up`` invocation asks for."""
    return ClusterSpec(
        backend=args.backend,
        broker=args.broker,
        name=args.name,
        nodes=args.nodes,
        kafka_version=args.kafka_version,
        mode=args.mode,
        inventory=args.inventory,
        vagrant_dir=args.vagrant_dir,
        kafka_tarball=args.kafka_tarball,
        disk=args.disk,
    )


def cmd_up(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    if spec.disk != "plain" and spec.backend != "local":
        raise HarnessError(f"--disk {spec.disk} needs the local backend, not {spec.backend}")
    console = Console()
    impl = broker.named(spec.broker)  # an unknown broker: one line, before anything is made
    if not args.no_kafka:  # reject an impossible shape before provisioning anything
        impl.validate(spec)
    if args.mirror and spec.broker != broker.DEFAULT:
        raise HarnessError(f"--mirror pairs Kafka clusters; not {spec.broker}")
    t0 = time.monotonic()
    cluster = _existing_or_new(spec, console)
    try:
        if not args.no_kafka:
            console.print(f"starting {impl.label(cluster)} ...")
            impl.start_cluster(cluster, spec)
            log.info("cluster %s (%s) up in %.1f s", cluster.name, impl.name,
                     time.monotonic() - t0)  # fmt: skip
        if args.mirror:
            _mirror_pair(cluster, spec, args.mirror, console)
        _print_nodes(console, cluster, probe_nodes(cluster))
        console.print(f"bootstrap servers: {cluster.bootstrap_servers()}")
    finally:
        cluster.close()
    return 0


def _mirror_pair(cluster: Cluster, spec: ClusterSpec, dc2_nodes: int, console: Console) -> None:
    from kafka_chaos.harness import mirror_pair

    console.print(f"starting dc2 ({dc2_nodes} nodes) and the MirrorMaker node ...")
    pair = mirror_pair.ensure(cluster, spec, dc2_nodes)
    try:
        console.print(f"dc2 bootstrap servers: {pair.dc2.bootstrap_servers()}")
        console.print(f"MirrorMaker node: {pair.mm.name} ({pair.mm_node.address})")
    finally:
        pair.close()


def _existing_or_new(spec: ClusterSpec, console: Console) -> Cluster:
    """Reuse a reachable cluster of the same shape; otherwise (re)create it."""
    if backends.cluster_exists(spec.name):
        cluster = backends.load_cluster(spec.name)
        why = backends.why_not_reusable(cluster, spec)
        if why is None:
            console.print(f"reusing cluster [bold]{spec.name}[/]")
            return cluster
        console.print(f"cluster [bold]{spec.name}[/] cannot be reused ({why}); recreating it")
        _stop_kafka(cluster, console)
        cluster.close()
        backends.destroy_cluster(spec.name)
    console.print(f"creating {spec.backend} cluster [bold]{spec.name}[/] ({spec.nodes} nodes)")
    return backends.create_cluster(spec)


def cmd_status(args: argparse.Namespace) -> int:
    cluster = backends.load_cluster(args.name)
    console = Console()
    try:
        brokers = _print_nodes(console, cluster, probe_nodes(cluster))
        if brokers:
            _print_kafka_state(console, cluster)
        else:
            console.print("no live broker process on any node")
    finally:
        cluster.close()
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    console = Console()
    names = backends.list_clusters() if args.all else [args.name]
    if args.all and not names:
        console.print("no clusters: nothing to remove")
    # A disaster-recovery pair goes with its dc1 (harness.mirror_pair names it).
    pair = [] if args.all else _pair_names(args.name)
    errors = []
    for name in [*names, *pair]:
        if backends.cluster_exists(name):
            cluster = backends.load_cluster(name)
            _stop_kafka(cluster, console)
            cluster.close()
        try:
            removed = backends.destroy_cluster(name)
        except HarnessError as e:
            errors.append(str(e))
            continue
        if removed:
            console.print(f"cluster [bold]{name}[/]: removed")
            for item in removed:
                console.print(f"  {item}")
        elif name not in pair:
            console.print(f"cluster [bold]{name}[/]: nothing to remove")
    _reap_engines(console)
    if errors:
        raise HarnessError("; ".join(errors))
    return 0


def _reap_engines(console: Console) -> None:
    """Stop the Spark Connect servers whose owner was killed (checkers/connect_server.py):
    only those, matched by their record's pid and command line, never by name."""
    from kafka_chaos.checkers import connect_server

    for pid in connect_server.reap():
        console.print(f"Spark Connect server pid {pid}: its owner was gone; stopped")


def _pair_names(name: str) -> list[str]:
    """dc2 and the MirrorMaker node of ``name``'s pair, orphans included (after a SIGKILL)."""
    from kafka_chaos.harness.mirror_pair import dc2_name, mm_name

    names = []
    for n in (dc2_name(name), mm_name(name)):
        try:
            backends.validate_name(n)
        except HarnessError:
            continue  # too long to be a pair's: never created
        if backends.cluster_exists(n) or _is_orphan(n):
            names.append(n)
    return names


def _is_orphan(name: str) -> bool:
    from kafka_chaos.harness.backends import local

    return os.geteuid() == 0 and local.find_orphan(name) is not None


def _stop_kafka(cluster: Cluster, console: Console) -> None:
    """Best-effort graceful broker stop, bounded: teardown kills whatever is left anyway."""
    try:
        impl = broker.of(cluster)
    except HarnessError as e:  # a cluster.json from elsewhere: teardown still removes it
        console.print(f"  [yellow]{e}[/] (teardown ends what is left)")
        return
    problems: list[str] = []

    def stop() -> None:
        try:
            problems.extend(impl.stop_cluster(cluster, STOP_KAFKA_TIMEOUT_S) or [])
        except Exception as e:  # teardown must go on whatever the broker does
            problems.append(str(e))

    console.print(f"cluster [bold]{cluster.name}[/]: stopping {impl.name} ...")
    worker = threading.Thread(target=stop, daemon=True, name=f"stop-kafka-{cluster.name}")
    worker.start()
    worker.join(STOP_KAFKA_TIMEOUT_S + 20)
    if worker.is_alive():
        problems.append(f"still stopping after {STOP_KAFKA_TIMEOUT_S + 20:.0f}s")
    for problem in problems:
        console.print(f"  [yellow]{problem}[/] (teardown ends what is left)")


def _print_nodes(console: Console, cluster: Cluster, up: dict[str, bool]) -> int:
    """Print the node table; return how many nodes have a live broker process."""
    brokers = 0
    table = Table(
        title=f"cluster {cluster.name} ({cluster.backend}, {broker.of(cluster).label(cluster)})"
    )
    for column in ("node", "id", "address", "ssh", "processes", "root_dir"):
        table.add_column(column)
    if cluster.storage:  # the storage nodes answer SSH too; their rows say "storage"
        up = {**up, **probe_nodes(dataclasses.replace(cluster, nodes=cluster.storage))}
    for node in [*cluster.nodes, *cluster.storage]:
        try:
            procs = node_processes(cluster, node)
            brokers += any(p.name == cluster.broker and p.alive for p in procs)
            shown = ", ".join(
                f"{p.name}:{p.pid}" if p.alive else f"{p.name}:[red]dead[/]" for p in procs
            )
        except HarnessError:
            shown = "[red]unknown[/]"
        ssh = "[green]up[/]" if up.get(node.name) else "[red]down[/]"
        ident = "storage" if node in cluster.storage else str(node.node_id)
        table.add_row(node.name, ident, node.address, ssh, shown or "-", node.root_dir)
    console.print(table)
    return brokers


def _print_kafka_state(console: Console, cluster: Cluster) -> None:
    admin, kafka_db = (
        _optional("kafka_chaos.harness.admin"),
        _optional("kafka_chaos.harness.kafka_db"),
    )
    if admin is None or kafka_db is None:
        console.print("[yellow]harness.admin/kafka_db not installed: no Kafka state[/]")
        return
    try:
        kraft = broker.of(cluster).has_controller
        controller = kafka_db.controller_id(cluster, timeout_s=ADMIN_TIMEOUT_S) if kraft else None
        partitions = admin.describe_topics(cluster.bootstrap_servers(), timeout_s=ADMIN_TIMEOUT_S)
    except HarnessError as e:  # an unhealthy cluster is a status, not a crash
        console.print(f"[red]Kafka not answering within {ADMIN_TIMEOUT_S:.0f}s:[/] {e}")
        return
    if kraft:
        shown = controller if controller is not None else "[red]none[/]"
        console.print(f"active controller: {shown}")
    if not partitions:
        console.print("no topics")
        return
    table = Table(title="partitions")
    for column in ("topic", "partition", "leader", "replicas", "isr"):
        table.add_column(column)
    for p in partitions:
        isr = ",".join(map(str, p.isr))
        if len(p.isr) < len(p.replicas):
            isr = f"[yellow]{isr}[/]"
        table.add_row(
            p.topic,
            str(p.partition),
            str(p.leader) if p.leader is not None else "[red]none[/]",
            ",".join(map(str, p.replicas)),
            isr,
        )
    console.print(table)


def _optional(module: str) -> ModuleType | None:
    """Import a sibling area's module if that area is installed."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name == module:
            return None
        raise
