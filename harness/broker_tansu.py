"""Tansu 0.6.0 as a ``harness.broker.Broker``: stateless brokers on one PostgreSQL.

Why this shape (docs/brokers.md): every Tansu broker keeps every record,
offset and group in one shared PostgreSQL, so a Tansu cluster is N broker
nodes plus one storage node (``Cluster.storage``), each in its own namespace
with its own sshd.  The storage node is made, recorded and removed by the
backend like any node, so ``cluster down`` ends its PostgreSQL and deletes
its data directory (under the node's root) even after a SIGKILL.

Each broker is a ``services.Service`` like Kafka's: a launcher in
``config/``, a pid file, and every signal checked against the node's tag.
Tansu refuses unknown arguments, so the tag rides in its environment, and
the launcher execs it through a link under the node's root, which puts that
root on its command line, where teardown (``backends/procs.py``) looks.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from kafka_chaos.harness import (
    admin,
    fan_out,
    kafka_db,
    postgres_db,
    services,
    tansu_build,
    tansu_evidence,
)
from kafka_chaos.harness.cluster import BROKER_PORT, Cluster
from kafka_chaos.harness.errors import ConfigError, HarnessError
from kafka_chaos.harness.node import Node, quote
from kafka_chaos.harness.services import Service
from kafka_chaos.harness.spec import ClusterSpec
from kafka_chaos.harness.store import HISTORY

log = logging.getLogger(__name__)

TANSU = Service("tansu", tagged_by="environ")
DATABASE = "tansu"
CLUSTER_ID = "kafka-chaos"
# Warnings and errors only: ``warn,tansu_storage=debug`` logs every produce's
# offsets and producer id, but with every span's enter and exit, 434 MB in one
# minute's run on the broker the consumers used.  The stored rows themselves
# are the evidence (``evidence``); KC_TANSU_RUST_LOG asks for more.
RUST_LOG = "warn"
# Extra PostgreSQL settings for the storage node, ``name=value;name=value``
# (e.g. ``log_statement=mod;log_lock_waits=on``): which transaction wrote what,
# for a finding's mechanism.  Off by default: a statement log costs the database.
PG_SETTINGS_ENV = "KC_TANSU_PG_SETTINGS"
STEP_TIMEOUT_S = 300.0
HEALTH_CHECK_S = 5.0
EVIDENCE = tansu_evidence.RESULT


def storage_node(cluster: Cluster) -> Node:
    if not cluster.storage:
        raise HarnessError(f"cluster {cluster.name!r} has no storage node: recreate it")
    return cluster.storage[0]


def storage_url(cluster: Cluster) -> str:
    return f"postgres://{postgres_db.USER}@{storage_node(cluster).address}:{postgres_db.PORT}/{DATABASE}"


def pg_settings(text: str | None) -> dict[str, str]:
    """``KC_TANSU_PG_SETTINGS`` as settings; a malformed item is one clear line."""
    out: dict[str, str] = {}
    for item in (text or "").split(";"):
        if not item.strip():
            continue
        name, eq, value = item.partition("=")  # a value keeps its spaces (a log prefix)
        if not eq or not name.strip().replace("_", "").replace(".", "").isalnum():
            raise ConfigError(f"{PG_SETTINGS_ENV}: {item!r} is not name=value")
        out[name.strip()] = value
    return out


def launcher(node: Node, cluster: Cluster) -> str:
    """The broker's launcher: its settings in the environment, its pid in the pid file."""
    url = f"tcp://{node.address}:{BROKER_PORT}"
    env = {
        "KAFKA_CHAOS_ROOT": node.root_dir,  # the ownership tag (services.tag)
        "CLUSTER_ID": CLUSTER_ID,
        "LISTENER_URL": url,
        "ADVERTISED_LISTENER_URL": url,
        "STORAGE_ENGINE": storage_url(cluster),
        "RUST_LOG": os.environ.get("KC_TANSU_RUST_LOG", RUST_LOG),
        "NO_COLOR": "1",
    }
    return (
        "#!/bin/sh\n# written by kafka-chaos (harness/broker_tansu.py)\n"
        + "".join(f"export {k}={quote(v)}\n" for k, v in env.items())
        + f"cd {quote(node.root_dir)}\n"
        + f"echo $$ > {quote(TANSU.pid_file(node))}\n"
        + f"exec {quote(_link(node))} broker --silent\n"
    )


def _link(node: Node) -> str:
    """In run/, not config/: the logs collected (config/ and logs/) hold no link out."""
    return node.path("run", "tansu")


class TansuBroker:
    name = "tansu"
    storage_nodes = 1
    has_controller = False  # every broker is node 111 and leads every partition
    no_replica_logs = (
        "Tansu keeps no replicas: every record is one row of PostgreSQL's record table, "
        "read back instead (storage-evidence.json)"
    )
    refused_faults = {
        "corrupt-segment": "Tansu's records are PostgreSQL rows, not log segments",
        "power-loss": "it drops a Kafka log directory's unsynced writes; Tansu has none",
        "disk-full": "it fills a Kafka log directory's file system; Tansu has none",
        "unclean-election": "every Tansu broker leads every partition: no election to force",
        "rolling-restart": "it waits for each broker to rejoin the ISR; Tansu has no ISR",
        "hard-rolling-restart": "it waits for each broker to rejoin the ISR; Tansu has no ISR",
        "clock-bump": "the harness moves a local node's clock per JVM (libfaketime), not Tansu's",
        "clock-strobe": "the harness moves a local node's clock per JVM (libfaketime), not Tansu's",
        "partition": "Tansu's brokers never talk to each other, so a partition between them "
        "cuts nothing",
        "isolate-from-brokers": "Tansu's brokers never talk to each other",
        "netsplit": "Tansu's brokers never talk to each other",
        "mirror-kill": "MirrorMaker pairs are Kafka clusters",
        "mirror-pause": "MirrorMaker pairs are Kafka clusters",
    }
    refused_targets = {
        "controller": "Tansu has no KRaft controller",
        "leader": "every Tansu broker is node 111 and leads every partition",
        "isr": "Tansu keeps no replicas, so no ISR",
        "coordinator": "every Tansu broker is every coordinator",
        "group-coordinator": "every Tansu broker is every coordinator",
        "share-coordinator": "Tansu 0.6.0 has no share groups",
    }
    default_faults = ("kill",)

    def label(self, cluster: Cluster) -> str:
        return f"Tansu {tansu_build.TANSU_VERSION} on PostgreSQL"

    def validate(self, spec: ClusterSpec) -> None:
        if spec.backend != "local":
            raise ConfigError(f"--broker tansu runs on the local backend only, not {spec.backend}")
        if spec.disk != "plain":
            raise ConfigError("--broker tansu keeps its data in PostgreSQL: --disk must be plain")
        if spec.mode != "kraft":
            raise ConfigError("--broker tansu has no metadata mode: leave --mode kraft")
        if spec.nodes < 1:
            raise ConfigError(f"cluster.nodes {spec.nodes}: need at least one broker")
        if spec.broker_config:
            raise ConfigError("cluster.broker_config is Kafka's server.properties; Tansu has none")

    def start_cluster(self, cluster: Cluster, spec: ClusterSpec) -> None:
        t0 = time.monotonic()
        binary, schema = tansu_build.binary(), tansu_build.schema()
        storage = storage_node(cluster)
        postgres_db.configure(
            storage,
            clients=[n.address for n in cluster.nodes],
            settings=pg_settings(os.environ.get(PG_SETTINGS_ENV)),
        )
        postgres_db.start(storage)
        _until(lambda: postgres_db.ready(storage), f"{storage.name}: PostgreSQL ready", 60.0)
        postgres_db.create_database(storage, DATABASE)
        if not postgres_db.sql(storage, "SELECT to_regclass('public.record')", DATABASE).strip():
            postgres_db.apply_file(storage, schema.read_text(), DATABASE)
        t1 = time.monotonic()

        def up(node: Node) -> bool:
            node.write_files({TANSU.launcher(node): launcher(node, cluster)})
            node.run(f"ln -sfn {quote(str(binary))} {quote(_link(node))}", timeout=15)
            return services.start(TANSU, node)

        fan_out.on_nodes(
            cluster.nodes, up, timeout_s=STEP_TIMEOUT_S, what="starting tansu"
        ).values()
        self.wait_healthy(cluster, kafka_db.HEALTHY_TIMEOUT_S)
        log.info("cluster %s up: PostgreSQL %.1fs, brokers healthy %.1fs", cluster.name,
                 t1 - t0, time.monotonic() - t1)  # fmt: skip

    def stop_cluster(self, cluster: Cluster, timeout_s: float) -> list[str]:
        problems: list[str] = []
        stopped = fan_out.on_nodes(
            cluster.nodes,
            lambda n: services.stop(TANSU, n, timeout_s, True),
            timeout_s=STEP_TIMEOUT_S + timeout_s,
            what="stopping tansu",
        )
        problems += [str(o.error) for o in stopped.failures()]
        for node in cluster.storage:  # after the brokers: they are its clients
            try:
                postgres_db.stop(node, timeout_s)
            except HarnessError as e:
                problems.append(str(e))
        return problems

    def health_problems(self, cluster: Cluster, topic: str | None) -> list[str]:
        """What keeps the cluster from serving now: PostgreSQL, each broker, the topic."""
        problems = [f"{n.name}: PostgreSQL not ready" for n in cluster.storage
                    if not postgres_db.ready(n)]  # fmt: skip

        def answers(node: Node) -> list[int]:
            return admin.broker_ids(f"{node.address}:{BROKER_PORT}", HEALTH_CHECK_S)

        asked = fan_out.on_nodes(cluster.nodes, answers, timeout_s=HEALTH_CHECK_S + 30,
                                 what="asking each broker")  # fmt: skip
        problems += [f"{o.node.name}: {o.error}" for o in asked.failures()]
        if topic and not problems:
            try:
                parts = admin.describe_topics(cluster.bootstrap_servers(), [topic], HEALTH_CHECK_S)
            except admin.AdminError as e:
                return [str(e)]
            problems += [f"{p.topic}-{p.partition}: no leader" for p in parts if p.leader is None]
        return problems

    def wait_healthy(self, cluster: Cluster, timeout_s: float, topic: str | None = None) -> None:
        last: list[str] = []

        def healthy() -> bool:
            last[:] = self.health_problems(cluster, topic)
            return not last

        try:
            _until(healthy, f"cluster {cluster.name!r} healthy", timeout_s * cluster.time_scale)
        except HarnessError as e:
            down = [n.name for n in cluster.nodes if not self.is_running(n)]
            extra = f"; tansu down on {down} (see logs/tansu.out)" if down else ""
            raise HarnessError(f"{e}: {'; '.join(last[:10])}{extra}") from None

    def kill(self, cluster: Cluster, node: Node, whole_node: bool = True) -> None:
        services.kill(TANSU, node)

    def stop(self, cluster: Cluster, node: Node) -> None:
        services.stop(TANSU, node, services.STOP_TIMEOUT_S)

    def ensure_running(self, cluster: Cluster, node: Node) -> bool:
        return services.start(TANSU, node)

    def configured(self, node: Node) -> bool:
        script = f"test -f {quote(TANSU.launcher(node))}"
        return node.run(script, timeout=15, check=False).exit_code == 0

    def pause(self, cluster: Cluster, node: Node) -> None:
        services.signal(TANSU, node, "STOP")

    def resume(self, cluster: Cluster, node: Node) -> None:
        services.signal(TANSU, node, "CONT")

    def is_running(self, node: Node) -> bool:
        try:
            return services.running(TANSU, node)
        except HarnessError:
            return False

    def collect_logs(self, node: Node, dest: Path) -> list[Path]:
        return kafka_db.collect_logs(node, dest)  # logs/ and config/ of a node, whatever runs

    def state_locations(self, cluster: Cluster) -> dict[str, str]:
        where = {f"{n.name} (PostgreSQL)": postgres_db.data_dir(n) for n in cluster.storage}
        where.update({n.name: "none: the broker is stateless" for n in cluster.nodes})
        return where

    def set_debug_loggers(self, cluster: Cluster, loggers: list[str]) -> None:
        """Nothing to set live: Tansu's level is RUST_LOG at start, and
        kafka_chaos/options.py refuses --broker-debug on any broker but Kafka."""

    def evidence(self, cluster: Cluster, topic: str, run_dir: Path) -> dict[str, Any]:
        """Every row PostgreSQL holds for ``topic``, set beside the acknowledged sends
        (``tansu_evidence``) and written to ``storage-evidence.json``, as DumpLogSegments'
        reading is for Kafka."""
        query = (
            "SELECT tp.partition, r.offset_id, encode(r.v, 'escape') FROM record r "
            "JOIN topition tp ON r.topition = tp.id JOIN topic t ON tp.topic = t.id "
            f"WHERE t.name = '{topic}' ORDER BY tp.partition, r.offset_id"
        )
        rows = []
        for line in postgres_db.sql(storage_node(cluster), query, DATABASE).splitlines():
            partition, offset, value = line.split("|", 2)
            rows.append((int(partition), int(offset), value))
        acked = tansu_evidence.acknowledged(run_dir / HISTORY, topic)
        found = {"topic": topic, **tansu_evidence.compare(acked, rows)}
        (run_dir / EVIDENCE).write_text(json.dumps(found, indent=1) + "\n")
        log.info("%s: %s", topic, tansu_evidence.summary(found))
        return found


def _until(ready: Any, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() >= deadline:
            raise HarnessError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(1.0)


BROKER = TansuBroker()
