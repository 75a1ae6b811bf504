"""Rendering of every file a Kafka or ZooKeeper node needs: pure functions.

Nothing here touches a node; ``kafka_db`` uploads what these return.  Keeping
rendering pure makes the configs unit-testable and lets a run record exactly
what the brokers were given.

Test-oriented defaults: session timeouts are short (~6 s) so failover tests
see leadership move quickly, internal topics are sized for small clusters,
topic auto-creation is off (a typo must not silently create a topic), and the
KRaft unclean-election sweep runs every second instead of every 5 minutes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka_chaos.harness.cluster import BROKER_PORT, CONTROLLER_PORT, ZOOKEEPER_PORT
from kafka_chaos.harness.distribution import major
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.node import Node, quote

MODES = ("kraft", "zk")
ZOOKEEPER_HEAP_MB = 128
ZK_PEER_PORT = 2888
ZK_ELECTION_PORT = 3888
MIN_HEAP_MB = 128

# libfaketime (Debian's package ``libfaketime``) gives each local node's JVMs
# their own wall clock: local nodes share one kernel clock (``Cluster.clock``).
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
# libfaketime reads its offset file again once MORE than FAKETIME_CACHE_DURATION
# whole seconds have passed since it last did: 0 means once a second (not on
# every clock call; 1 would mean every 2 s), so a JVM sees a new offset
# within FAKETIME_REFRESH_S (measured: 0.1-1.0 s).
FAKETIME_CACHE_DURATION = 0
FAKETIME_REFRESH_S = 1.0

# Failure detection that a healthy but slow guest (a VM under software
# emulation, 10-30x slower than the host) would trip: a quorum election every
# second, a broker fenced or its registration given up.  These are multiplied
# by the cluster's measured slowdown (``Cluster.time_scale``), which is 1 on
# local namespaces and real hosts, so their configs do not change.
# replica.lag.time.max.ms is not among them: a follower dropped from the ISR
# too early costs a healthy cluster nothing, and the unclean-election
# reproduction needs the ISR to shrink within its fault.
SCALED_WITH_GUEST_SPEED = (
    "broker.session.timeout.ms",
    "broker.heartbeat.interval.ms",
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
    "controller.quorum.request.timeout.ms",
    "initial.broker.registration.timeout.ms",
    "zookeeper.session.timeout.ms",
    "zookeeper.connection.timeout.ms",
    "tickTime",
)

KAFKA_MAIN = "kafka.Kafka"
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def validate(version: str, mode: str, nodes: int, heap_mb: int) -> None:
    """Reject cluster shapes Kafka cannot run, naming the offending option."""
    major(version)
    if mode not in MODES:
        raise ConfigError(f"cluster.mode {mode!r}: must be one of {', '.join(MODES)}")
    if mode == "zk" and major(version) >= 4:
        raise ConfigError(
            f"cluster.mode 'zk' needs Kafka 3.x; Kafka {version} removed ZooKeeper (use kraft)"
        )
    if nodes < 1:
        raise ConfigError(f"cluster.nodes {nodes}: need at least one node")
    if heap_mb < MIN_HEAP_MB:
        raise ConfigError(f"cluster.broker_heap_mb {heap_mb}: at least {MIN_HEAP_MB} MB needed")


def render_properties(props: Mapping[str, object]) -> str:
    """Java properties text, one ``key=value`` per line in insertion order."""
    lines = []
    for key, value in props.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if "\n" in text or "\n" in key:
            raise ConfigError(f"broker config {key!r}: values must be single-line")
        lines.append(f"{key}={text}")
    return "\n".join(lines) + "\n"


def scaled_for_guest_speed(props: dict[str, object], scale: float) -> dict[str, object]:
    """``props`` with the failure-detection timings multiplied by ``scale`` (>= 1)."""
    if scale <= 1.0:
        return props
    return {
        k: int(int(str(v)) * scale) if k in SCALED_WITH_GUEST_SPEED else v for k, v in props.items()
    }


# Share groups (KIP-932) keep their members' session on the broker too, with
# Kafka's default of 45 s (and a 45 s minimum): a share member that crashed and
# whose leave was lost keeps its partitions, and nobody else gets their records,
# for that long.  These match the classic consumers' 10 s session, as the
# KIP-848 settings below do, so a share drain can wait out a crashed member's
# session (workloads/share_consumer.py).  Names and bounds: apache/kafka's
# GroupCoordinatorConfig (``group.share.session.timeout.ms``, its ``min``/``max``
# 45000/60000, ``group.share.heartbeat.interval.ms`` and its ``min``/``max``
# 5000/15000; the heartbeat must be below the session), present with the same
# names in the 3.9.2 and 4.4.0 jars.  Set only where the harness runs share
# groups (SHARE_GROUPS_SINCE, as ``consumer.mode: share`` requires).
SHARE_GROUPS_SINCE = (4, 2)
SHARE_SESSION_TIMEOUT_MS = 10000
SHARE_GROUP_PROPS: dict[str, object] = {
    "group.share.min.session.timeout.ms": 6000,
    "group.share.session.timeout.ms": SHARE_SESSION_TIMEOUT_MS,
    "group.share.min.heartbeat.interval.ms": 1000,
    "group.share.heartbeat.interval.ms": 3000,
}


def has_share_groups(version: str | None) -> bool:
    """Whether brokers of ``version`` get the share-group settings (None: unknown, no)."""
    if version is None:
        return False
    parts = version.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return False
    return (int(parts[0]), int(parts[1])) >= SHARE_GROUPS_SINCE


def _common_broker_props(node: Node, n_nodes: int) -> dict[str, object]:
    rf = min(3, n_nodes)
    return {
        "listeners": f"PLAINTEXT://{node.address}:{BROKER_PORT}",
        "advertised.listeners": f"PLAINTEXT://{node.address}:{BROKER_PORT}",
        "log.dirs": node.path("data", "kafka"),
        "num.partitions": 1,
        "default.replication.factor": rf,
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": 10,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": min(2, rf),
        "transaction.state.log.num.partitions": 10,
        "group.initial.rebalance.delay.ms": 0,
        # The new consumer group protocol (KIP-848) keeps session and heartbeat
        # timing on the broker, with a 45 s minimum session by default; these
        # match the classic consumers' 10 s session so the two protocols are
        # compared under the same failure detection (unknown keys on 3.x brokers
        # are only logged).
        "group.consumer.min.session.timeout.ms": 6000,
        "group.consumer.session.timeout.ms": 10000,
        "group.consumer.min.heartbeat.interval.ms": 1000,
        "group.consumer.heartbeat.interval.ms": 3000,
        "auto.create.topics.enable": False,
        "replica.lag.time.max.ms": 10000,
        "num.network.threads": 2,
        "num.io.threads": 4,
        "num.replica.fetchers": 1,
        "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
    }


def kraft_server_properties(
    node: Node,
    nodes: Sequence[Node],
    overrides: Mapping[str, str] | None = None,
    scale: float = 1.0,
    version: str | None = None,
) -> str:
    """Combined broker+controller node with a static quorum of all nodes; with
    ``version`` a share-group release, the share-group session settings too."""
    voters = ",".join(f"{n.node_id}@{n.address}:{CONTROLLER_PORT}" for n in nodes)
    props: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": node.node_id,
        "controller.quorum.voters": voters,
        **_common_broker_props(node, len(nodes)),
        "listeners": (
            f"PLAINTEXT://{node.address}:{BROKER_PORT},CONTROLLER://{node.address}:{CONTROLLER_PORT}"
        ),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "broker.session.timeout.ms": 6000,
        "broker.heartbeat.interval.ms": 1000,
        "unclean.leader.election.interval.ms": 1000,
        # Kafka's defaults, stated so that slow guests can scale them.
        "controller.quorum.election.timeout.ms": 1000,
        "controller.quorum.fetch.timeout.ms": 2000,
        "controller.quorum.request.timeout.ms": 2000,
        "initial.broker.registration.timeout.ms": 60000,
        **(SHARE_GROUP_PROPS if has_share_groups(version) else {}),
    }
    props = scaled_for_guest_speed(props, scale)
    props.update(overrides or {})
    return render_properties(props)


def zk_server_properties(
    node: Node,
    nodes: Sequence[Node],
    overrides: Mapping[str, str] | None = None,
    scale: float = 1.0,
) -> str:
    """A ZooKeeper-mode broker talking to the ensemble on the same nodes."""
    props: dict[str, object] = {
        "broker.id": node.node_id,
        **_common_broker_props(node, len(nodes)),
        "zookeeper.connect": zookeeper_connect(nodes),
        "zookeeper.session.timeout.ms": 6000,
        "zookeeper.connection.timeout.ms": 10000,
    }
    props = scaled_for_guest_speed(props, scale)
    props.update(overrides or {})
    return render_properties(props)


def zookeeper_connect(nodes: Sequence[Node]) -> str:
    return ",".join(f"{n.address}:{ZOOKEEPER_PORT}" for n in nodes)


def zookeeper_myid(node: Node, nodes: Sequence[Node]) -> int:
    """ZooKeeper ids must be 1..255; use the node's 1-based position."""
    for i, n in enumerate(nodes, start=1):
        if n.name == node.name:
            return i
    raise ConfigError(f"node {node.name!r} is not one of the cluster's nodes")


def zookeeper_properties(node: Node, nodes: Sequence[Node], scale: float = 1.0) -> str:
    """One member of a ZooKeeper ensemble spanning all nodes (its tick, and so the
    longest session it grants, scaled like the brokers' session timeout)."""
    props: dict[str, object] = {
        "dataDir": node.path("data", "zookeeper"),
        "clientPort": ZOOKEEPER_PORT,
        "clientPortAddress": node.address,
        "tickTime": 1000,
        "initLimit": 10,
        "syncLimit": 5,
        "maxClientCnxns": 0,
        "admin.enableServer": False,
        "4lw.commands.whitelist": "ruok,srvr,stat,mntr",
    }
    for i, n in enumerate(nodes, start=1):
        props[f"server.{i}"] = f"{n.address}:{ZK_PEER_PORT}:{ZK_ELECTION_PORT}"
    return render_properties(scaled_for_guest_speed(props, scale))


# Kafka 4's log4j2 re-reads a changed config file within this many seconds:
# ``--broker-debug`` (harness/broker_debug.py) turns loggers to DEBUG on
# running brokers by rewriting the file, and back for the next run.
LOG_RELOAD_S = 2


def logging_config(version: str, log_file: str | None, debug_loggers: Sequence[str] = ()) -> str:
    """Log config for the Kafka release line: to ``log_file``, or WARN to stderr.

    3.x reads log4j 1 properties (reload4j); 4.x reads log4j2 properties,
    re-read when they change (LOG_RELOAD_S), with ``debug_loggers`` at DEBUG
    into the same rotating file.
    """
    if major(version) < 4:
        if log_file is None:
            return render_properties(
                {
                    "log4j.rootLogger": "WARN, stderr",
                    "log4j.appender.stderr": "org.apache.log4j.ConsoleAppender",
                    "log4j.appender.stderr.Target": "System.err",
                    "log4j.appender.stderr.layout": "org.apache.log4j.PatternLayout",
                    "log4j.appender.stderr.layout.ConversionPattern": "[%d] %p %m (%c)%n",
                }
            )
        return render_properties(
            {
                "log4j.rootLogger": "INFO, file",
                "log4j.appender.file": "org.apache.log4j.RollingFileAppender",
                "log4j.appender.file.File": log_file,
                "log4j.appender.file.MaxFileSize": "50MB",
                "log4j.appender.file.MaxBackupIndex": 2,
                "log4j.appender.file.layout": "org.apache.log4j.PatternLayout",
                "log4j.appender.file.layout.ConversionPattern": "[%d] %p %m (%c)%n",
                "log4j.logger.kafka.request.logger": "WARN",
            }
        )
    if log_file is None:
        return render_properties(
            {
                "status": "warn",
                "appender.err.type": "Console",
                "appender.err.name": "err",
                "appender.err.target": "SYSTEM_ERR",
                "appender.err.layout.type": "PatternLayout",
                "appender.err.layout.pattern": "[%d] %p %m (%c)%n",
                "rootLogger.level": "warn",
                "rootLogger.appenderRef.err.ref": "err",
            }
        )
    debug: dict[str, object] = {}
    for i, name in enumerate(debug_loggers):
        debug[f"logger.debug{i}.name"] = name
        debug[f"logger.debug{i}.level"] = "debug"
    return render_properties(
        {
            "status": "warn",
            "monitorInterval": LOG_RELOAD_S,
            "appender.file.type": "RollingFile",
            "appender.file.name": "file",
            "appender.file.fileName": log_file,
            "appender.file.filePattern": f"{log_file}.%i",
            "appender.file.layout.type": "PatternLayout",
            "appender.file.layout.pattern": "[%d] %p %m (%c)%n",
            "appender.file.policies.type": "Policies",
            "appender.file.policies.size.type": "SizeBasedTriggeringPolicy",
            "appender.file.policies.size.size": "50MB",
            "appender.file.strategy.type": "DefaultRolloverStrategy",
            "appender.file.strategy.max": 2,
            "rootLogger.level": "info",
            "rootLogger.appenderRef.file.ref": "file",
            "logger.request.name": "kafka.request.logger",
            "logger.request.level": "warn",
            **debug,
        }
    )


def logging_flag(version: str, config_path: str) -> str:
    """The JVM system property that points the logging backend at its config."""
    if major(version) < 4:
        return f"-Dlog4j.configuration=file:{config_path}"
    return f"-Dlog4j2.configurationFile={config_path}"


def jvm_flags(root_dir: str, heap_mb: int) -> list[str]:
    """Flags for every JVM we start on a node.

    ``-Dkafka.chaos.root`` tags the process with its node so pid-file checks
    can verify a pid is ours.  Serial GC and C1-only JIT keep CPU use low on
    small shared machines and shorten startup.  UTC makes the logs' timestamps
    mean the same instant on every node, whatever its time zone (the replica
    verification reads truncation times from them).
    """
    return [
        f"-Dkafka.chaos.root={root_dir}",
        f"-Xms{heap_mb}m",
        f"-Xmx{heap_mb}m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        "-Duser.timezone=UTC",
    ]


def java_command(
    root_dir: str,
    heap_mb: int,
    classpath: str,
    log_flag: str,
    main: str,
    args: Sequence[str],
) -> str:
    """A shell-quoted ``java`` command line (the classpath glob stays literal)."""

    parts = ["java", *jvm_flags(root_dir, heap_mb), log_flag, "-cp", classpath, main, *args]
    return " ".join(quote(p) for p in parts)


def faketime_file(node: Node) -> str:
    """The node's clock offset (libfaketime syntax, e.g. ``+0``, ``-1.500``) its JVMs read."""
    return node.path("run", "faketime")


def faketime_env(offset_file: str) -> dict[str, str]:
    """Environment that runs a JVM on the clock in ``offset_file``.

    Only the wall clock moves, as a real clock bump would: monotonic time
    stays true (the JVM hangs without ``FAKETIME_DONT_FAKE_MONOTONIC``, and
    a real bump never moves it either), and file times are the kernel's
    (``NO_FAKE_STAT``), so a time Kafka stores in a file is never shifted twice.
    ``FAKETIME_FORCE_MONOTONIC_FIX=0``: on glibc the library turns that fix
    on by itself, and then every timed wait on a monotonic condition
    variable returns at once, so each parked JVM thread spins (a timed
    ``parkNanos`` ran ~5000 times too often here) and a KRaft quorum never
    forms on a loaded machine.
    """
    return {
        "LD_PRELOAD": FAKETIME_LIB,
        "FAKETIME_TIMESTAMP_FILE": offset_file,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_FORCE_MONOTONIC_FIX": "0",
        "FAKETIME_CACHE_DURATION": str(FAKETIME_CACHE_DURATION),
        "NO_FAKE_STAT": "1",
    }


def launcher_script(pid_file: str, command: str, faketime: str | None = None) -> str:
    """A shell script that records its own pid and becomes the JVM.

    Writing ``$$`` then ``exec`` makes the pid file hold the JVM's pid no
    matter how ``setsid``/``nohup`` fork on the way.  With ``faketime`` (an
    offset file) the JVM runs under libfaketime; the file starts at ``+0``
    unless a clock fault already wrote it, so a broker restarted during a
    clock fault comes back on the faulted clock, as on a real machine.
    Without the library the JVM runs on the real clock and clock faults
    refuse to start (``kafka_db.unfaked_services``) rather than pretend.
    """
    lines = ["#!/bin/sh", "# written by kafka-chaos", f"echo $$ > {pid_file}"]
    if faketime is not None:
        f = quote(faketime)
        exports = " ".join(f"{k}={quote(v)}" for k, v in faketime_env(faketime).items())
        lines += [
            f"[ -s {f} ] || {{ echo +0 > {f}.$$ && mv -f {f}.$$ {f}; }}",
            "unset FAKETIME",
            f"if [ -r {quote(FAKETIME_LIB)} ]; then export {exports}; "
            f"else echo 'kafka-chaos: no {FAKETIME_LIB}: clock faults unavailable' >&2; fi",
        ]
    return "\n".join([*lines, f"exec {command}", ""])
