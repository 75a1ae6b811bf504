"""MirrorMaker 2 as a node service: dc1 -> dc2, configured, started and signalled by pid file.

MirrorMaker runs in dedicated mode (``org.apache.kafka.connect.mirror.MirrorMaker``),
the way Kafka's ``connect-mirror-maker.sh`` runs it, on a node of its own.
It is a JVM like a broker, so it gets the same launcher, pid file and
ownership tag (``harness.services.Service``), and the nemesis kills and
pauses it exactly as it does a broker.  Its jars come from Maven Central
(``distribution.fetch_mirror``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from kafka_chaos.harness import distribution, services
from kafka_chaos.harness import kafka_config as kc
from kafka_chaos.harness.cluster import BROKER_PORT
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.node import Node
from kafka_chaos.harness.services import Service

log = logging.getLogger(__name__)

MIRROR = Service("mirrormaker")
MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
SOURCE, TARGET = "dc1", "dc2"
POLICIES = {
    "identity": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
    "default": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
}
CHECKPOINTS_TOPIC = f"{SOURCE}.checkpoints.internal"  # on dc2, under either policy
OFFSETS_TOPIC = f"mm2-offsets.{SOURCE}.internal"  # on dc2: how far each source task copied


def remote_topic(topic: str, policy: str) -> str:
    """The name dc2's copy of dc1's ``topic`` has under ``policy``."""
    return topic if policy == "identity" else f"{SOURCE}.{topic}"


class MirrorSpec(Protocol):
    """What MirrorMaker's setup reads of the mirror workload's settings
    (``workloads.mirror_spec.MirrorSpec``, declared by the workload above)."""

    dc2_nodes: int
    exactly_once: bool
    replication_policy: str
    sync_interval_s: float
    offset_lag_max: int
    tasks: int
    heap_mb: int


def validate(spec: MirrorSpec) -> None:
    if spec.replication_policy not in POLICIES:
        raise ConfigError(
            f"mirror.replication_policy: {spec.replication_policy!r} is not one of "
            f"{', '.join(POLICIES)}"
        )
    if not 1 <= spec.dc2_nodes <= 9:
        raise ConfigError(f"mirror.dc2_nodes: {spec.dc2_nodes} is not within 1..9")
    if spec.sync_interval_s < 1:
        raise ConfigError("mirror.sync_interval_s must be at least 1 s")
    if spec.tasks < 1 or spec.heap_mb < 128:
        raise ConfigError("mirror.tasks must be >= 1 and mirror.heap_mb >= 128")


@dataclass(frozen=True)
class Endpoints:
    """Where MirrorMaker finds each cluster, as seen from its node."""

    dc1: list[str]  # broker addresses
    dc2: list[str]


def properties(spec: MirrorSpec, ends: Endpoints, topic: str, groups: str) -> dict[str, object]:
    """mm2.properties for one flow dc1 -> dc2 of ``topic``, checkpointing ``groups`` (a regex).

    Offset syncs live on dc2 (``offset-syncs.topic.location=target``): a
    netsplit of dc1 must not take away what translation needs.  Group offsets
    are not synced into dc2's groups: the failover applies the checkpoints
    itself, as an operator does with ``RemoteClusterUtils.translateOffsets``,
    so the history says which offsets the group was given.
    """
    rf = min(3, len(ends.dc2))
    seconds = max(1, round(spec.sync_interval_s))
    flow = f"{SOURCE}->{TARGET}"
    props: dict[str, object] = {
        "clusters": f"{SOURCE}, {TARGET}",
        f"{SOURCE}.bootstrap.servers": ",".join(f"{a}:{BROKER_PORT}" for a in ends.dc1),
        f"{TARGET}.bootstrap.servers": ",".join(f"{a}:{BROKER_PORT}" for a in ends.dc2),
        f"{flow}.enabled": "true",
        f"{TARGET}->{SOURCE}.enabled": "false",
        f"{flow}.topics": topic,
        f"{flow}.groups": groups,
        f"{flow}.emit.checkpoints.enabled": "true",
        f"{flow}.emit.checkpoints.interval.seconds": seconds,
        f"{flow}.sync.group.offsets.enabled": "false",
        f"{flow}.refresh.topics.interval.seconds": seconds,
        f"{flow}.refresh.groups.interval.seconds": seconds,
        f"{flow}.offset.lag.max": spec.offset_lag_max,
        "offset-syncs.topic.location": "target",
        # How often the source tasks record how far they copied: the run
        # waits on that record to call MirrorMaker caught up (Connect's
        # default is a minute).  A worker setting: per target cluster.
        f"{TARGET}.offset.flush.interval.ms": seconds * 1000,
        "tasks.max": spec.tasks,
        "replication.policy.class": POLICIES[spec.replication_policy],
        "replication.factor": rf,
        "checkpoints.topic.replication.factor": rf,
        "heartbeats.topic.replication.factor": rf,
        "offset-syncs.topic.replication.factor": rf,
        "offset.storage.replication.factor": rf,
        "config.storage.replication.factor": rf,
        "status.storage.replication.factor": rf,
    }
    if spec.exactly_once:
        # KIP-656 (Kafka 3.5+): the source tasks write records and their
        # offsets in one transaction on dc2; the internal REST endpoint lets
        # the leader fence zombie tasks.
        props[f"{TARGET}.exactly.once.source.support"] = "enabled"
        props["dedicated.mode.enable.internal.rest"] = "true"
        props["listeners"] = "http://0.0.0.0:8083"
        props[f"{SOURCE}.consumer.isolation.level"] = "read_committed"
    return props


def node_files(
    node: Node, spec: MirrorSpec, ends: Endpoints, topic: str, groups: str, version: str,
    dist: distribution.Distribution,
) -> dict[str, str]:  # fmt: skip
    """Every file ``configure`` writes on the MirrorMaker node, by absolute path."""
    cfg = node.path("config")
    command = kc.java_command(
        node.root_dir,
        spec.heap_mb,
        dist.node_classpath(),
        kc.logging_flag(version, f"{cfg}/mirrormaker-log.properties"),
        MAIN,
        # Only dc2's herder: without it MirrorMaker also runs one that writes to dc1
        # (Connect's internal topics, heartbeats), which a DR node has no business doing.
        [f"{cfg}/mm2.properties", "--clusters", TARGET],
    )
    return {
        f"{cfg}/mm2.properties": kc.render_properties(properties(spec, ends, topic, groups)),
        f"{cfg}/mirrormaker-log.properties": kc.logging_config(
            version, node.path("logs", "mirrormaker.log")
        ),
        MIRROR.launcher(node): kc.launcher_script(MIRROR.pid_file(node), command),
    }


def configure(
    node: Node, spec: MirrorSpec, ends: Endpoints, topic: str, groups: str, version: str
) -> distribution.Distribution:
    """Install MirrorMaker's jars on ``node`` and write its config for this run."""
    validate(spec)
    dist = distribution.fetch_mirror(version)
    distribution.install(node, dist)
    node.write_files(node_files(node, spec, ends, topic, groups, version, dist))
    return dist


def start(node: Node) -> bool:
    return services.start(MIRROR, node)


def stop(node: Node, timeout_s: float = 20.0) -> bool:
    return services.stop(MIRROR, node, timeout_s)


def kill(node: Node) -> bool:
    return services.kill(MIRROR, node)


def pause(node: Node) -> bool:
    return services.signal(MIRROR, node, "STOP")


def resume(node: Node) -> bool:
    return services.signal(MIRROR, node, "CONT")


def is_running(node: Node) -> bool:
    return services.running(MIRROR, node)
