"""Run options: one table maps CLI flags and suite keys onto the TestSpec.

A spec is built in layers, each overriding the last: defaults, a scenario
preset, a config file, then command-line flags.  Keeping the flag table in
one place means the CLI, suites and the README describe the same options.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
from pathlib import Path
from typing import Any

import yaml

from kafka_chaos.checkers.remote import address
from kafka_chaos.harness import spec_sections
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.lazyfs import DISKS
from kafka_chaos.harness.option import Option, parse_bool, parse_faults
from kafka_chaos.harness.spec import LIBRDKAFKA_DEBUG_CONTEXTS, TestSpec
from kafka_chaos.nemeses import registry
from kafka_chaos.nemeses.base import TARGET_MODES
from kafka_chaos.nemeses.schedule import validate_nemesis
from kafka_chaos.workloads import registry as workloads


def _spark_remote(text: str) -> str:
    """An ``sc://HOST:PORT`` URL, refused at parse time rather than after the run."""
    try:
        address(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _names(text: str) -> list[str]:
    """A comma-separated list kept as given (empty names too): ``validate`` names
    what is wrong in one line, for a flag and a config file alike."""
    return [part.strip() for part in text.split(",")]


OPTIONS: tuple[Option, ...] = (
    Option("--name", "name", str, "test name (the store directory)"),
    Option("--workload", "workload", str, "what the clients do (workloads/registry.py)"),
    Option("--time-limit", "time_limit_s", float, "seconds of workload and faults"),
    Option("--seed", "seed", int, "seed for the fault schedule and consumer crashes"),
    Option("--backend", "cluster.backend", str, "node backend", ("local", "vagrant", "ssh")),
    Option("--broker", "cluster.broker", str, "broker implementation: kafka (default) or tansu"),
    Option("--cluster-name", "cluster.name", str, "cluster to create or reuse"),
    Option("--nodes", "cluster.nodes", int, "number of nodes (3 or 5)"),
    Option("--kafka-version", "cluster.kafka_version", str, "Kafka version from Maven Central"),
    Option("--mode", "cluster.mode", str, "metadata mode", ("kraft", "zk")),
    Option("--inventory", "cluster.inventory", str, "ssh backend: TOML/YAML host inventory"),
    Option("--vagrant-dir", "cluster.vagrant_dir", str, "vagrant backend: Vagrantfile dir"),
    Option("--kafka-tarball", "cluster.kafka_tarball", str, "official Kafka tarball to use"),
    Option(
        "--disk",
        "cluster.disk",
        str,
        "broker data on the host disk, on lazyfs (drops unsynced writes on power-loss) "
        "or on a size-limited tmpfs (disk-full fills it)",
        DISKS,
    ),
    Option("--partitions", "topic.partitions", int, "topic partitions"),
    Option("--replication-factor", "topic.replication_factor", int, "topic replication"),
    Option("--min-insync-replicas", "topic.min_insync_replicas", int, "min.insync.replicas"),
    Option(
        "--unclean-leader-election",
        "topic.unclean_leader_election",
        parse_bool,
        "unclean.leader.election.enable (true/false)",
    ),
    Option("--producers", "producer.workers", int, "producer workers"),
    Option("--acks", "producer.acks", str, "producer acks", ("0", "1", "all")),
    Option("--idempotence", "producer.enable_idempotence", parse_bool, "enable.idempotence"),
    Option("--retries", "producer.retries", int, "producer retries"),
    Option("--max-in-flight", "producer.max_in_flight", int, "max in-flight requests"),
    Option("--linger-ms", "producer.linger_ms", int, "producer linger.ms"),
    Option("--message-bytes", "producer.message_bytes", int, "message size in bytes"),
    Option("--rate", "producer.rate", float, "target sends per second, all producers"),
    Option(
        "--producer-client",
        "producer.client",
        str,
        "whose client sends: librdkafka, or Kafka's Java client of --kafka-version",
        ("librdkafka", "java"),
    ),
    Option(
        "--consumer-client",
        "consumer.client",
        str,
        "whose client reads in groups: librdkafka, or Kafka's Java client of --kafka-version",
        ("librdkafka", "java"),
    ),
    Option(
        "--client",
        "producer.client",
        str,
        "whose client sends and reads: sets --producer-client and --consumer-client; "
        "both: one run per client, the same seed and fault schedule",
        ("librdkafka", "java", "both"),
        also=("consumer.client",),
    ),
    Option(
        "--client-jar",
        "client_jar",
        str,
        "Java client: this kafka-clients jar instead of the released one (a patched client)",
        metavar="JAR",
    ),
    Option("--groups", "consumer.groups", int, "consumer groups"),
    Option("--consumers-per-group", "consumer.workers_per_group", int, "consumers per group"),
    Option("--consumer-mode", "consumer.mode", str, "group mode", ("subscribe", "assign", "share")),
    Option("--commit", "consumer.commit", str, "commit policy", ("auto", "manual")),
    Option(
        "--group-protocol",
        "consumer.group_protocol",
        str,
        "consumer group protocol (subscribe mode)",
        ("classic", "consumer"),
    ),
    Option(
        "--share-release-probability",
        "consumer.share_release_probability",
        float,
        "share: chance a member releases a record instead of accepting it",
    ),
    Option(
        "--share-reject-probability",
        "consumer.share_reject_probability",
        float,
        "share: chance a member rejects (archives) a record",
    ),
    Option("--share-lock-ms", "consumer.share_lock_ms", int, "share: record lock duration"),
    Option(
        "--share-delivery-limit",
        "consumer.share_delivery_limit",
        int,
        "share: deliveries of a record before the broker archives it",
    ),
    Option(
        "--share-probe",
        "consumer.share_probe",
        parse_bool,
        "share: probe a share-partition that stops delivering, while it lasts (true/false)",
    ),
    Option(
        "--consumer-crash-interval",
        "consumer.crash_interval_s",
        float,
        "crash and restart a consumer this often (seconds)",
    ),
    Option("--faults", "nemesis.faults", parse_faults, "comma-separated fault kinds, or none"),
    Option("--fault-interval", "nemesis.interval_s", float, "quiet seconds between faults"),
    Option("--fault-duration", "nemesis.duration_s", float, "seconds each fault lasts"),
    Option("--targets", "nemesis.targets", str, "fault targets", TARGET_MODES),
    Option("--spark-master", "checker.spark_master", str, "Spark master for the checkers"),
    Option(
        "--spark-remote",
        "checker.spark_remote",
        _spark_remote,
        "check on this running Spark Connect server, not a Spark of its own",
        metavar="sc://HOST:PORT",
    ),
    Option(
        "--ww-deps",
        "checker.ww_deps",
        parse_bool,
        "txn cycle checks: infer ww edges from offset order (false: --no-ww-deps)",
    ),
    Option(
        "--availability-min-rate",
        "checker.availability_min_rate",
        float,
        "msg/s that must hold while a fault is active",
    ),
)

# The clients' and brokers' debug logs (docs/debug-logs.md).  Also taken by
# ``reproduce``, ``shrink`` and bench/attribution.py: a replay is where one
# usually wants them.
DEBUG_OPTIONS: tuple[Option, ...] = (
    Option(
        "--client-debug",
        "debug.client",
        str,
        "keep each client's debug log in RUN_DIR/client-logs/: librdkafka debug contexts "
        "(bare: per kind of client, e.g. eos,msg,protocol,broker for producers); the Java "
        "client logs its send, transaction and share internals at DEBUG",
        bare="default",
        metavar="CONTEXTS",
    ),
    Option(
        "--client-debug-max-mb",
        "debug.client_max_mb",
        float,
        "client debug logs of one run, on disk, at most (default 200 MB)",
        metavar="MB",
    ),
    Option(
        "--broker-debug",
        "debug.broker",
        _names,
        "broker loggers at DEBUG for this run, e.g. kafka.server.share (Kafka 4)",
        metavar="LOGGER[,LOGGER...]",
    ),
)
OPTIONS = (*OPTIONS, *DEBUG_OPTIONS)


def every_option() -> tuple[Option, ...]:
    """This table's options and those the workloads declare (workloads/registry.py)."""
    return (*OPTIONS, *workloads.options())


def add_run_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("run options (override scenario and config file)")
    for opt in every_option():
        _add(group, opt)
    group.add_argument(
        "--no-ww-deps",
        dest=_dest(Option("", "checker.ww_deps", parse_bool, "")),
        action="store_const",
        const=False,
        help="txn cycle checks from wr edges only (Jepsen's --no-ww-deps): G1c becomes an error",
    )


def add_debug_options(parser: argparse.ArgumentParser) -> None:
    """The debug-log flags alone, for commands that re-run a recorded run."""
    group = parser.add_argument_group("debug logs (docs/debug-logs.md)")
    for opt in DEBUG_OPTIONS:
        _add(group, opt)


def debug_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The debug-log flags the user gave, as a layer over a recorded config."""
    nested: dict[str, Any] = {}
    for opt in DEBUG_OPTIONS:
        value = getattr(args, _dest(opt), None)
        if value is not None:
            set_path(nested, opt.path, value)
    return nested


def _add(group: Any, opt: Option) -> None:
    extra: dict[str, Any] = {"nargs": "?", "const": opt.bare} if opt.bare is not None else {}
    group.add_argument(
        opt.flag,
        dest=_dest(opt),
        type=opt.type,
        choices=opt.choices,
        default=None,
        help=opt.help,
        metavar=opt.metavar,
        **extra,
    )


def _dest(opt: Option) -> str:
    return "opt__" + "_and_".join((opt.path, *opt.also)).replace(".", "__")


def cli_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The options the user actually gave, as a nested mapping."""
    nested: dict[str, Any] = {}
    for opt in every_option():
        value = getattr(args, _dest(opt), None)
        if value is not None:
            for path in (opt.path, *opt.also):
                set_path(nested, path, value)
    return nested


def set_path(mapping: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        mapping = mapping.setdefault(part, {})
    mapping[leaf] = value


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``override`` onto a copy of ``base``."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_mapping(path: Path) -> dict[str, Any]:
    """Read a JSON or YAML file of options, naming the file on error."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from e
    try:
        data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: line {e.lineno}: not valid JSON: {e.msg}") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise ConfigError(f"{path}: {where}not valid YAML: {getattr(e, 'problem', e)}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of options at the top level")
    return data


def build_spec(*layers: dict[str, Any]) -> TestSpec:
    """Defaults, then each layer in order; validates the result."""
    data = TestSpec().to_dict()
    for layer in layers:
        data = merge(data, layer)
    if not any("backend" in (layer.get("cluster") or {}) for layer in layers):
        data = merge(data, existing_cluster_layer(data["cluster"]["name"]))
    if not any("disk" in (layer.get("cluster") or {}) for layer in layers):
        data = merge(data, existing_disk_layer(data["cluster"]["name"]))
    if not any("broker" in (layer.get("cluster") or {}) for layer in layers):
        data = merge(data, existing_broker_layer(data["cluster"]["name"]))
    if not any("faults" in (layer.get("nemesis") or {}) for layer in layers):
        data = merge(data, default_faults_layer(data["cluster"]["broker"]))
    if not any("name" in layer for layer in layers):
        data["name"] = data["workload"]  # runs are stored by name: txn runs apart from queue
    spec = TestSpec.from_dict(data)
    validate(spec)
    return spec


def existing_cluster_layer(name: str) -> dict[str, Any]:
    """The backend of the existing cluster ``name``, for runs that name no backend.

    After ``cluster up --backend vagrant``, ``run --cluster-name NAME`` must run
    on those VMs: the default backend (local) would make the run replace them
    with namespaces.
    """
    from kafka_chaos.harness.cluster import cluster_dir

    try:
        saved = json.loads((cluster_dir(name) / "cluster.json").read_text())
    except (OSError, ValueError):
        return {}
    backend = saved.get("backend")
    if not isinstance(backend, str):
        return {}
    layer: dict[str, Any] = {"backend": backend}
    inventory = (saved.get("backend_state") or {}).get("inventory")
    if backend == "ssh" and inventory:
        layer["inventory"] = inventory
    return {"cluster": layer}


# Faults that need the cluster's broker data on one disk, and why (one line each).
DISK_OF_FAULT: dict[str, tuple[str, str]] = {
    "power-loss": (
        "lazyfs",
        "a plain disk keeps unsynced writes in the page cache, so nothing would be lost",
    ),
    "disk-full": (
        "tmpfs",
        "the fault fills a size-limited file system the harness made, never the host's disk",
    ),
}


def existing_disk_layer(name: str) -> dict[str, Any]:
    """The disk of the existing cluster ``name`` (lazyfs), for runs that name none:
    ``run --cluster-name NAME --faults power-loss`` after ``cluster up --disk lazyfs``."""
    from kafka_chaos.harness.cluster import cluster_dir

    try:
        saved = json.loads((cluster_dir(name) / "cluster.json").read_text())
    except (OSError, ValueError):
        return {}
    disk = (saved.get("backend_state") or {}).get("disk")
    return {"cluster": {"disk": disk}} if disk in DISKS else {}


def existing_broker_layer(name: str) -> dict[str, Any]:
    """The broker of the existing cluster ``name``, for runs that name none:
    ``run --cluster-name k1`` after ``cluster up --broker tansu --name k1``."""
    from kafka_chaos.harness.cluster import cluster_dir

    try:
        saved = json.loads((cluster_dir(name) / "cluster.json").read_text())
    except (OSError, ValueError):
        return {}
    found = saved.get("broker")
    return {"cluster": {"broker": found}} if isinstance(found, str) else {}


def default_faults_layer(name: str) -> dict[str, Any]:
    """The faults a run on broker ``name`` gets when it names none (an unknown
    broker is refused by ``validate``)."""
    from kafka_chaos.harness import broker

    try:
        return {"nemesis": {"faults": list(broker.named(name).default_faults)}}
    except ConfigError:
        return {}


def validate(spec: TestSpec) -> None:
    """Reject contradictory settings before any node is touched."""
    c = spec.cluster
    if c.nodes < 1:
        raise ConfigError("cluster.nodes must be at least 1")
    if c.mode not in ("kraft", "zk"):
        raise ConfigError(f"cluster.mode must be kraft or zk, not {c.mode!r}")
    if c.mode == "zk" and not c.kafka_version.startswith("3."):
        raise ConfigError(f"ZooKeeper mode needs Kafka 3.x; {c.kafka_version} is KRaft-only")
    if c.backend == "ssh" and not c.inventory:
        raise ConfigError("the ssh backend needs --inventory FILE")
    if spec.checker.spark_remote:
        address(spec.checker.spark_remote)  # a config file's, refused before the run too
    if c.disk not in DISKS:
        raise ConfigError(f"cluster.disk must be one of {', '.join(DISKS)}, not {c.disk!r}")
    if c.disk != "plain" and c.backend != "local":
        raise ConfigError(f"--disk {c.disk} needs the local backend, not {c.backend}")
    validate_nemesis(spec.nemesis)  # an unknown or refused fault, before any node is made
    _validate_broker(spec)
    scheduled = [op.get("f") for op in spec.nemesis.schedule or [] if isinstance(op, dict)]
    for fault in dict.fromkeys((*spec.nemesis.faults, *scheduled)):
        need = DISK_OF_FAULT.get(fault)
        if need and c.disk != need[0]:
            raise ConfigError(f"{fault} needs broker data on {need[0]}: add --disk {need[0]} "
                              f"({need[1]})")  # fmt: skip
    t = spec.topic
    if t.replication_factor > c.nodes:
        raise ConfigError(
            f"topic.replication_factor {t.replication_factor} exceeds cluster.nodes {c.nodes}"
        )
    if not 1 <= t.min_insync_replicas <= t.replication_factor:
        raise ConfigError("topic.min_insync_replicas must be between 1 and the replication factor")
    if spec.producer.acks not in ("0", "1", "all", "-1"):
        raise ConfigError(f"producer.acks must be 0, 1 or all, not {spec.producer.acks!r}")
    if spec.time_limit_s <= 0:
        raise ConfigError("time_limit_s must be positive")
    if spec.producer.rate <= 0:
        raise ConfigError("producer.rate must be positive")
    _validate_client(spec)
    _validate_debug(spec)
    _validate_share(spec)
    _validate_group_protocol(spec)
    _validate_fault_lists(spec)
    workloads.validate_section(spec)


def _validate_broker(spec: TestSpec) -> None:
    """An unknown broker, a shape it cannot run, or a fault or target that makes
    no sense on it: one line each, before any node is made (harness/broker.py)."""
    from kafka_chaos.harness import broker

    broker.named(spec.cluster.broker).validate(spec.cluster)
    refused = broker.refusal(spec)
    if refused:
        raise ConfigError(refused)
    if spec.debug.broker and spec.cluster.broker != broker.DEFAULT:
        raise ConfigError(f"--broker-debug sets Kafka's log4j loggers; {spec.cluster.broker} "
                          "has none (its log level is fixed by the harness)")  # fmt: skip


JAVA_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR")
_LOGGER_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)*")


def _validate_debug(spec: TestSpec) -> None:
    """librdkafka refuses an unknown debug context only when a client starts, in
    a worker thread; a log4j logger name is not checked at all.  Both are
    caught here, before any node is touched."""
    d = spec.debug
    if d.client is not None:
        contexts = [c.strip() for c in str(d.client).split(",")]
        if d.client != "default":
            unknown = [c for c in contexts if c not in LIBRDKAFKA_DEBUG_CONTEXTS]
            if unknown:
                shown = ", ".join(repr(c) for c in unknown)
                raise ConfigError(
                    f"debug.client: {shown} is not a librdkafka debug context (known: "
                    f"{', '.join(LIBRDKAFKA_DEBUG_CONTEXTS)}; or give none for the defaults)"
                )
    if not d.client_max_mb > 0:
        raise ConfigError(f"debug.client_max_mb must be positive, not {d.client_max_mb}")
    for key, names in (("debug.broker", d.broker), ("debug.java_loggers", d.java_loggers)):
        if not isinstance(names, list):
            raise ConfigError(f"{key}: expected a list of logger names, got {names!r}")
        for entry in names:
            if not isinstance(entry, str) or not entry.strip():
                raise ConfigError(f"{key}: an empty logger name in {','.join(map(str, names))!r}")
            name, _, level = entry.partition("=")
            if key == "debug.java_loggers" and level and level.upper() not in JAVA_LEVELS:
                raise ConfigError(
                    f"{key}: {entry!r}: the level must be one of {', '.join(JAVA_LEVELS)}"
                )
            if not _LOGGER_NAME.fullmatch(name if key == "debug.java_loggers" else entry):
                raise ConfigError(
                    f"{key}: {entry!r} is not a logger name (dotted, like kafka.server.share)"
                )
    if d.broker and spec.cluster.kafka_version.split(".")[0] in ("2", "3"):
        raise ConfigError(
            f"debug.broker needs Kafka 4 (its brokers reload their log4j2 config); "
            f"Kafka {spec.cluster.kafka_version}'s read theirs only at start"
        )


def _validate_fault_lists(spec: TestSpec) -> None:
    """Each fault a declared section lists (``Section.fault_lists``: a mirror run's
    dc2 faults) is a kind the nemeses know."""
    for section in spec_sections.every():
        if section.name in spec.sections:
            for key in section.fault_lists:
                for f in getattr(spec.sections[section.name], key):
                    registry.kind(f, f"{section.name}.{key}")


def _validate_client(spec: TestSpec) -> None:
    """The Java client runs the workloads that declare it (java_client: the queue
    workload's producers, consumer-group and share-group members, and the txn
    workload's processes)."""
    declared = workloads.find(spec.workload)
    for role, client in (("producer", spec.producer.client), ("consumer", spec.consumer.client)):
        if client not in ("librdkafka", "java"):
            raise ConfigError(f"{role}.client must be librdkafka or java, not {client!r}")
        if client == "java" and (declared is None or not declared.java_client):
            java = [n for n in workloads.names() if workloads.declared(n).java_client]
            raise ConfigError(
                f"{role}.client java runs the {' and '.join(java)} workloads, not {spec.workload}'s"
            )
    if spec.client_jar is not None:
        jar = Path(spec.client_jar)
        if not spec.java_client:
            raise ConfigError("client_jar replaces Kafka's Java client: set --client java")
        if jar.suffix != ".jar" or not jar.is_file():
            raise ConfigError(f"client_jar {spec.client_jar}: no such jar file")
    one_client = declared is not None and declared.one_client
    if one_client and spec.producer.client != spec.consumer.client:
        raise ConfigError(
            "a txn process owns one producer and one consumer of one client: "
            "set both with --client librdkafka|java"
        )


def _kafka_at_least(version: str, want: tuple[int, int]) -> bool:
    parts = version.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return False
    return (int(parts[0]), int(parts[1])) >= want


def _validate_share(spec: TestSpec) -> None:
    """Share groups: Kafka 4.2+, explicit acknowledgement odds, and the broker's bounds."""
    c = spec.consumer
    if c.mode != "share":
        return
    if not _kafka_at_least(spec.cluster.kafka_version, (4, 2)):
        raise ConfigError(
            f"consumer.mode share needs Kafka 4.2 or later (share groups, KIP-932, are "
            f"production-ready there), not {spec.cluster.kafka_version}"
        )
    if c.group_protocol != "classic":
        raise ConfigError(
            "consumer.group_protocol applies to consumer groups; share groups have their own"
        )
    odds = (c.share_release_probability, c.share_reject_probability)
    if min(odds) < 0 or sum(odds) > 1:
        raise ConfigError(
            "consumer.share_release_probability and share_reject_probability must be >= 0 "
            f"and add up to at most 1, got {odds[0]} and {odds[1]}"
        )
    if not 15000 <= c.share_lock_ms <= 60000:
        raise ConfigError(
            f"consumer.share_lock_ms must be within the broker's bounds, 15000..60000 "
            f"(group.share.min/max.record.lock.duration.ms), not {c.share_lock_ms}"
        )
    if not 2 <= c.share_delivery_limit <= 10:
        raise ConfigError(
            f"consumer.share_delivery_limit must be within the broker's bounds, 2..10 "
            f"(group.share.min/max.delivery.count.limit), not {c.share_delivery_limit}"
        )


def _validate_group_protocol(spec: TestSpec) -> None:
    c = spec.consumer
    if c.group_protocol not in ("classic", "consumer"):
        raise ConfigError(
            f"consumer.group_protocol: {c.group_protocol!r} is not classic or consumer"
        )
    if c.group_protocol == "classic":
        return
    if c.mode != "subscribe":
        raise ConfigError(
            "consumer.group_protocol consumer needs consumer.mode subscribe: the new "
            "protocol assigns partitions on the broker and has no assign()"
        )
    if not _kafka_at_least(spec.cluster.kafka_version, (4, 0)):
        raise ConfigError(
            f"consumer.group_protocol consumer needs Kafka 4.0 or later (KIP-848 is GA "
            f"there), not {spec.cluster.kafka_version}"
        )
