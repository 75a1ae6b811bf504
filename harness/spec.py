"""The test specification: one plain-data description of a chaos run.

Jepsen treats a test as a map of its parts; this is the same idea as nested
dataclasses.  A spec round-trips through JSON (``config.json`` in every run
directory), which is what makes ``--replay`` and ``reproduce`` possible and
what the checkers read to decide the severity of an anomaly.
"""

from __future__ import annotations

import dataclasses
import json
import random
import typing
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from kafka_chaos.harness import spec_sections
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.jsonfile import load_json

NEWEST_KAFKA = "4.4.0"
KAFKA_39 = "3.9.2"
SUPPORTED_KAFKA = (KAFKA_39, NEWEST_KAFKA)


@dataclass
class ClusterSpec:
    """Where the brokers run and which Kafka they run."""

    backend: str = "local"  # local | vagrant | ssh
    # Which implementation answers the Kafka protocol (harness/broker.py):
    # kafka (Apache Kafka, the default) | tansu (docs/brokers.md).
    broker: str = "kafka"
    name: str = "default"  # several local clusters may coexist under distinct names
    nodes: int = 3
    kafka_version: str = NEWEST_KAFKA
    mode: str = "kraft"  # kraft | zk (zk only on 3.9)
    inventory: str | None = None  # ssh backend: TOML/YAML file of hosts
    vagrant_dir: str | None = None  # vagrant backend: directory holding the Vagrantfile
    kafka_tarball: str | None = None  # use an official tarball instead of Maven Central
    broker_heap_mb: int = 512
    broker_config: dict[str, str] = field(default_factory=dict)  # extra server.properties
    # Where each node's Kafka log directory lives: plain (the host's disk), lazyfs
    # (a FUSE mount that drops unsynced writes on power-loss) or tmpfs (a
    # size-limited mount disk-full fills); lazyfs and tmpfs: local backend only.
    disk: str = "plain"


@dataclass
class TopicSpec:
    name: str = "chaos"
    partitions: int = 6
    replication_factor: int = 3
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    config: dict[str, str] = field(default_factory=dict)  # any other topic config


@dataclass
class ProducerSpec:
    workers: int = 2
    acks: str = "all"  # "0" | "1" | "all"
    enable_idempotence: bool = True
    retries: int | None = None  # None: librdkafka default
    max_in_flight: int = 5
    linger_ms: int = 5
    message_bytes: int = 100
    rate: float = 1000.0  # target acked+attempted sends per second, all workers together
    request_timeout_ms: int = 5000
    delivery_timeout_ms: int = 15000
    # Whose client sends: librdkafka (confluent-kafka) or Kafka's own Java client
    # of the cluster's version, through JPype (docs/java-client.md).
    client: str = "librdkafka"


@dataclass
class ConsumerSpec:
    groups: int = 1
    workers_per_group: int = 2
    mode: str = "subscribe"  # subscribe | assign | share (KIP-932 share groups, Kafka 4.2+)
    commit: str = "auto"  # auto | manual
    crash_interval_s: float | None = None  # consumer failover: crash a consumer this often
    session_timeout_ms: int = 10000
    # classic | consumer (KIP-848: the broker assigns; subscribe only; Kafka 4.0+).
    group_protocol: str = "classic"
    # Share groups (mode "share"): how members acknowledge, and the group's
    # lock and delivery limit (set as group configs; the broker's bounds are
    # 15-60 s and 2-10 by default).
    share_release_probability: float = 0.0
    share_reject_probability: float = 0.0
    share_lock_ms: int = 15000
    share_delivery_limit: int = 5
    # While a share-group run lasts, probe a share-partition that stops delivering
    # (workloads/share_watch.py).  Off unless asked (--share-probe, the share hunt):
    # the probe is a member of the group under test, so it can end or start the
    # stall it looks at, and its idle JVM shares the cores with the brokers.
    share_probe: bool = False
    # Whose client reads: librdkafka (confluent-kafka) or Kafka's own Java client
    # of the cluster's version, through JPype (docs/java-client.md).  The final
    # drain reads with librdkafka either way: it measures the log, not a client.
    client: str = "librdkafka"


@dataclass
class NemesisSpec:
    faults: list[str] = field(default_factory=lambda: ["kill", "partition"])
    interval_s: float = 10.0  # quiet time between faults
    duration_s: float = 8.0  # how long a fault lasts before it is healed
    targets: str = "random"  # random | leader | controller
    schedule: list[dict[str, Any]] | None = None  # explicit/replayed schedule overrides generation


@dataclass
class CheckerSpec:
    spark_master: str = "local[*]"
    # sc://HOST:PORT: check on this running Spark Connect server instead (checkers/remote.py)
    spark_remote: str | None = None
    examples: int = 10  # examples kept per anomaly
    availability_min_rate: float | None = None  # msg/s that must hold during faults
    ownership_grace_s: float = 10.0  # double ownership tolerated this long (rebalances)
    unowned_threshold_s: float = 30.0  # a partition may go unowned this long
    ww_deps: bool = True  # txn cycle checks infer ww edges (off: G1c is an error)
    cycles: bool = True  # txn runs: search dependency cycles (off: those checks are unknown)


# librdkafka's ``debug`` contexts (CONFIGURATION.md of librdkafka 2.x; every one
# is accepted by the librdkafka confluent-kafka ships, tests/unit checks that).
LIBRDKAFKA_DEBUG_CONTEXTS = (
    "generic", "broker", "topic", "metadata", "feature", "queue", "msg", "protocol",
    "cgrp", "security", "fetch", "interceptor", "plugin", "consumer", "admin", "eos",
    "mock", "assignor", "conf", "telemetry", "all",
)  # fmt: skip
# ``debug.client: default``: what a finding about each kind of client needs.
# Producers: the idempotent producer's pid/epoch and sequence handling (eos),
# batches (msg), every request and response (protocol) and the connections
# (broker).  Group members add the group's protocol (cgrp); share members
# have no context of their own in librdkafka: theirs is cgrp (heartbeats,
# assignment), fetch and consumer (ShareFetch, acquisitions, acknowledgements).
DEFAULT_CLIENT_DEBUG = {
    "producer": "eos,msg,protocol,broker",
    "consumer": "eos,msg,protocol,broker,cgrp",
    "share": "cgrp,fetch,consumer,protocol,broker",
}
# The Java client's loggers kept under ``debug.client`` (its own levels, not
# librdkafka's contexts), at DEBUG unless ``=LEVEL`` follows the name: the
# producer's send path (TRACE: each produce request and response, as
# librdkafka's ``protocol``) and transactions (TRACE: sequence numbers and
# epoch bumps), and the share consumer's internals.
DEFAULT_JAVA_DEBUG_LOGGERS = [
    "org.apache.kafka.clients.producer.internals.Sender=TRACE",
    "org.apache.kafka.clients.producer.internals.TransactionManager=TRACE",
    "org.apache.kafka.clients.producer.internals.RecordAccumulator",
    "org.apache.kafka.clients.consumer.internals.ShareConsumerImpl",
    "org.apache.kafka.clients.consumer.internals.ShareConsumeRequestManager",
    "org.apache.kafka.clients.consumer.internals.ShareSessionHandler",
    "org.apache.kafka.clients.consumer.internals.ShareMembershipManager",
    "org.apache.kafka.clients.consumer.internals.ShareHeartbeatRequestManager",
    "org.apache.kafka.clients.consumer.internals.ShareCompletedFetch",
]


@dataclass
class DebugSpec:
    """The clients' and brokers' own account of a run (docs/debug-logs.md).

    Off by default: a debug log costs throughput and disk, and most runs need
    only the history.  ``client``: None (off), ``default`` (per kind of client,
    DEFAULT_CLIENT_DEBUG) or librdkafka debug contexts for every librdkafka
    client; the Java client then logs ``java_loggers`` at DEBUG.  ``broker``:
    broker loggers set to DEBUG for this run only.
    """

    client: str | None = None
    client_max_mb: float = 200.0  # all client logs of a run together, on disk
    java_loggers: list[str] = field(default_factory=lambda: list(DEFAULT_JAVA_DEBUG_LOGGERS))
    broker: list[str] = field(default_factory=list)


@dataclass
class TestSpec:
    """A whole run. ``asdict(spec)`` is written to ``config.json``."""

    __test__ = False  # not a pytest class, despite the name

    name: str = "queue"
    workload: str = "queue"
    seed: int = field(default_factory=lambda: random.SystemRandom().randrange(2**31))
    time_limit_s: float = 60.0
    final_drain_timeout_s: float = 60.0
    scenario: str | None = None
    expected_verdict: str | None = None  # set by scenario presets: valid | invalid
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    topic: TopicSpec = field(default_factory=TopicSpec)
    producer: ProducerSpec = field(default_factory=ProducerSpec)
    consumer: ConsumerSpec = field(default_factory=ConsumerSpec)
    nemesis: NemesisSpec = field(default_factory=NemesisSpec)
    checker: CheckerSpec = field(default_factory=CheckerSpec)
    debug: DebugSpec = field(default_factory=DebugSpec)
    # Kafka's Java client only: this kafka-clients jar instead of the released one
    # of cluster.kafka_version, to run a patched client side by side with the
    # release (evidence/*/fix/).  One JVM per process, so every Java client of
    # the run loads it; never installed over the cached distribution.
    client_jar: str | None = None
    # The sections workloads declare (harness/spec_sections.py), by name; each is
    # written at the top level of config.json, and only when set.
    sections: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for declared in spec_sections.every():
            if declared.always and declared.name not in self.sections:
                self.sections[declared.name] = declared.type()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(data.pop("sections"))
        return data

    def section(self, name: str) -> Any:
        """Declared section ``name``: the run's values, or its defaults."""
        if name in self.sections:
            return self.sections[name]
        declared = spec_sections.find(name)
        if declared is None:
            raise ConfigError(f"no spec section {name!r} is declared")
        return declared.type()

    @property
    def java_client(self) -> bool:
        """Whether any of the run's clients is Kafka's Java client (a JVM in the process)."""
        return "java" in (self.producer.client, self.consumer.client)

    def save(self, path: Path, extra: dict[str, Any] | None = None) -> None:
        data = self.to_dict()
        data.update(extra or {})
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestSpec:
        return _build(cls, data, "config")

    @classmethod
    def load(cls, path: Path) -> TestSpec:
        return cls.from_dict(load_json(path, "config"))


def _build(cls: type, data: Any, where: str) -> Any:
    """Build dataclass ``cls`` from ``data``, naming the bad key on error.

    Unknown keys are rejected rather than ignored: a misspelt option silently
    falling back to a default would make a chaos run test something else.
    Keys outside the dataclass that a run adds (``versions``...) are allowed
    only at the top level.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls) if f.name != "sections" or cls is not TestSpec}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        declared = spec_sections.find(key) if cls is TestSpec and key not in known else None
        if declared is not None:
            kwargs.setdefault("sections", {})[key] = _build(declared.type, value, f"{where}.{key}")
            continue
        if key not in known:
            if cls is TestSpec and key in RUN_METADATA_KEYS:
                continue
            raise ConfigError(f"{where}.{key}: unknown option (known: {', '.join(sorted(known))})")
        sub = _nested_type(cls, key)
        kwargs[key] = _build(sub, value, f"{where}.{key}") if sub else value
    try:
        return cls(**kwargs)
    except TypeError as e:  # pragma: no cover - defensive
        raise ConfigError(f"{where}: {e}") from e


RUN_METADATA_KEYS = {
    "versions",
    "started_at",
    "run_dir",
    "harness_version",
    "topic_name_used",
    "guest_time_scale",
    "cluster_features",
}

# TestSpec's own sections, read off its fields rather than listed again.
_NESTED = {
    name: hint
    for name, hint in typing.get_type_hints(TestSpec).items()
    if isinstance(hint, type) and is_dataclass(hint)
}


def _nested_type(cls: type, key: str) -> type | None:
    return _NESTED.get(key) if cls is TestSpec else None


def replace(spec: TestSpec, **changes: Any) -> TestSpec:
    """``dataclasses.replace`` re-exported so callers need one import."""
    return dataclasses.replace(spec, **changes)
