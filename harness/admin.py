"""Admin queries against a running cluster (confluent-kafka AdminClient).

Every call is bounded: it builds a short-lived client whose socket and
request timeouts fit inside ``timeout_s`` and waits on futures with a timeout,
so a paused or partitioned broker can slow a call down but never hang it.

Stale metadata: metadata comes from whichever broker the client reaches first
among the bootstrap list (librdkafka skips brokers it cannot connect to, so a
paused or fully isolated broker is never asked).  A broker that *we* reach
but that is cut off from the controller can still answer with stale leaders
and ISRs; callers that need certainty pass a single ``host:port`` of a broker
they know is healthy, and ``describe_topics`` reports which broker answered
(``PartitionState.source``) so a sample can be judged later.

Controller: in ZooKeeper mode the metadata's controller id is the real
controller.  KRaft brokers report a random live broker instead (clients
cannot reach controllers), so ``controller_id`` is only meaningful in ZK
mode; ``kafka_db.controller_id(cluster)`` reads the KRaft quorum leader.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kafka_chaos.harness.errors import ConfigError, HarnessError
from kafka_chaos.harness.spec import TopicSpec

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0


class AdminError(HarnessError):
    """An admin request failed or timed out; the message names the request."""


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int | None  # None: no leader (offline partition)
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    source: int | None = None  # broker id that served this metadata

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "leader": self.leader,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
        }


def _client(bootstrap: str, timeout_s: float) -> Any:
    from confluent_kafka.admin import AdminClient

    ms = max(1000, int(timeout_s * 1000))
    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "socket.timeout.ms": ms,
            "socket.connection.setup.timeout.ms": min(ms, 5000),
            "reconnect.backoff.max.ms": 1000,
            "metadata.max.age.ms": 1000,
            "log_level": 0,  # silent: unreachable brokers are routine; errors surface as exceptions
        }
    )


def _metadata(bootstrap: str, timeout_s: float, topic: str | None = None) -> Any:
    from confluent_kafka import KafkaException

    try:
        return _client(bootstrap, timeout_s).list_topics(topic=topic, timeout=timeout_s)
    except KafkaException as e:
        raise AdminError(f"metadata request to {bootstrap} failed: {e.args[0]}") from e


def broker_ids(bootstrap: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[int]:
    """Ids of the brokers registered (alive, unfenced) in the cluster metadata."""
    return sorted(_metadata(bootstrap, timeout_s).brokers)


def broker_config(bootstrap: str, key: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[int, str]:
    """``key``'s value in force on each broker that answered, all within ``timeout_s``.

    What the brokers run with, not what the harness would render: a reused
    cluster keeps the config it started with (kafka_db.start_cluster).  One
    DescribeConfigs per broker: librdkafka takes one BROKER resource per call."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ResourceType

    deadline = time.monotonic() + timeout_s
    ids = broker_ids(bootstrap, timeout_s)
    client = _client(bootstrap, max(1.0, deadline - time.monotonic()))
    out: dict[int, str] = {}
    for b in ids:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        resource = ConfigResource(ResourceType.BROKER, str(b))
        try:
            [fut] = client.describe_configs([resource], request_timeout=left).values()
            entries = fut.result(timeout=left + 1)
        except (KafkaException, TimeoutError) as e:
            log.info("describe configs of broker %s: %s", b, e)
            continue
        if key in entries and entries[key].value is not None:
            out[b] = entries[key].value
    return out


def controller_id(bootstrap: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> int | None:
    """The controller id in the metadata (see the module note for KRaft)."""
    cid = _metadata(bootstrap, timeout_s).controller_id
    return cid if cid is not None and cid >= 0 else None


def describe_topics(
    bootstrap: str,
    topics: Iterable[str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[PartitionState]:
    """Leader, replicas and ISR of every partition of ``topics`` (None: all
    non-internal topics), sorted by topic and partition.

    A topic that does not exist raises ``AdminError`` naming it.
    """
    md = _metadata(bootstrap, timeout_s)
    wanted = None if topics is None else list(topics)
    names = [t for t in md.topics if not t.startswith("__")] if wanted is None else wanted
    out = []
    for name in names:
        tmd = md.topics.get(name)
        if tmd is None or (tmd.error is not None and not tmd.partitions):
            why = tmd.error.str() if tmd is not None and tmd.error else "unknown topic"
            raise AdminError(f"topic {name!r}: {why} (asked broker {md.orig_broker_id})")
        for pid, p in tmd.partitions.items():
            out.append(
                PartitionState(
                    topic=name,
                    partition=pid,
                    leader=p.leader if p.leader >= 0 else None,
                    replicas=tuple(p.replicas),
                    isr=tuple(p.isrs),
                    source=md.orig_broker_id,
                )
            )
    return sorted(out, key=lambda s: (s.topic, s.partition))


def topic_config(spec: TopicSpec) -> dict[str, str]:
    """The topic-level configs a TopicSpec asks for (extra config wins)."""
    return {
        "min.insync.replicas": str(spec.min_insync_replicas),
        "unclean.leader.election.enable": str(spec.unclean_leader_election).lower(),
        **{k: str(v) for k, v in spec.config.items()},
    }


def create_topic(bootstrap: str, spec: TopicSpec, timeout_s: float = 30.0) -> list[PartitionState]:
    """Create the topic (an existing one of the same shape is fine) and wait
    until every partition has a leader; returns its partitions.

    An existing topic with another partition count or replication factor is
    a ``ConfigError``: the run would silently test a different shape.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    if spec.partitions < 1 or spec.replication_factor < 1:
        raise ConfigError(f"topic {spec.name!r}: partitions and replication_factor must be >= 1")
    new = NewTopic(
        spec.name,
        num_partitions=spec.partitions,
        replication_factor=spec.replication_factor,
        config=topic_config(spec),
    )
    client = _client(bootstrap, timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        futures = client.create_topics(
            [new], request_timeout=timeout_s, operation_timeout=timeout_s
        )
        try:
            futures[spec.name].result(timeout=timeout_s + 5)
            break
        except KafkaException as e:
            err = e.args[0]
            if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                break
            if not _transient(err) or time.monotonic() > deadline:
                raise AdminError(f"create topic {spec.name!r}: {err.str()}") from e
            log.info("create topic %s: %s; trying again", spec.name, err.str())
            time.sleep(1.0)
        except TimeoutError as e:
            raise AdminError(f"create topic {spec.name!r}: no answer within {timeout_s}s") from e
    return _wait_topic_ready(bootstrap, spec, timeout_s)


def _transient(err: Any) -> bool:
    """An error that says nothing about the request, only about the connection it took.

    librdkafka drops the connection to a bootstrap address once it has
    learned the brokers' own addresses; a request in flight on it fails with
    ``_DESTROY_BROKER``, right after a cluster starts.
    """
    from confluent_kafka import KafkaError

    return err.retriable() or err.code() in (
        KafkaError._DESTROY_BROKER,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
    )


def _wait_topic_ready(bootstrap: str, spec: TopicSpec, timeout_s: float) -> list[PartitionState]:
    deadline = time.monotonic() + timeout_s
    last = "not described yet"
    while True:
        try:
            parts = describe_topics(bootstrap, [spec.name], timeout_s=min(10.0, timeout_s))
            rf = {len(p.replicas) for p in parts}
            if len(parts) != spec.partitions or rf != {spec.replication_factor}:
                raise ConfigError(
                    f"topic {spec.name!r} exists with {len(parts)} partitions and replication "
                    f"factor {sorted(rf)}, wanted {spec.partitions} x {spec.replication_factor}"
                )
            leaderless = [p.partition for p in parts if p.leader is None]
            if not leaderless:
                return parts
            last = f"partitions without a leader: {leaderless}"
        except AdminError as e:
            last = str(e)
        if time.monotonic() >= deadline:
            raise AdminError(f"topic {spec.name!r} not ready within {timeout_s}s: {last}")
        time.sleep(0.5)


def delete_topic(bootstrap: str, name: str, timeout_s: float = 30.0) -> bool:
    """Delete a topic; False if it did not exist."""
    from confluent_kafka import KafkaError, KafkaException

    client = _client(bootstrap, timeout_s)
    futures = client.delete_topics([name], request_timeout=timeout_s, operation_timeout=timeout_s)
    try:
        futures[name].result(timeout=timeout_s + 5)
    except KafkaException as e:
        err = e.args[0]
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return False
        raise AdminError(f"delete topic {name!r}: {err.str()}") from e
    except TimeoutError as e:
        raise AdminError(f"delete topic {name!r}: no answer within {timeout_s}s") from e
    return True


def end_offsets(bootstrap: str, topic: str, partitions: int, timeout_s: float) -> dict[int, int]:
    """partition -> high watermark, asked of every leader at once (ListOffsets, latest).

    Partitions that did not answer within ``timeout_s`` are left out: one
    leader that is down costs its own partitions, not the others' answers.
    """
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    wanted = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    client = _client(bootstrap, timeout_s)  # held until the futures are done
    futures = client.list_offsets(wanted, request_timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    out = {}
    for tp, future in futures.items():
        try:
            out[tp.partition] = future.result(timeout=max(0.1, deadline - time.monotonic())).offset
        except Exception as e:  # KafkaException, or the future's own timeout
            log.debug("end offset of %s-%d: %s", topic, tp.partition, e)
    return out


def topic_id(bootstrap: str, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """The topic's id as Kafka prints it and keys share state by."""
    from confluent_kafka import KafkaException, TopicCollection

    client = _client(bootstrap, timeout_s)  # kept alive until the answer: futures need it
    futures = client.describe_topics(TopicCollection([topic]), request_timeout=timeout_s)
    try:
        uid = futures[topic].result(timeout=timeout_s + 5).topic_id
    except KafkaException as e:
        raise AdminError(f"describe topic {topic!r}: {e.args[0].str()}") from e
    except TimeoutError as e:
        raise AdminError(f"describe topic {topic!r}: no answer within {timeout_s}s") from e
    return kafka_uuid(uid.get_most_significant_bits(), uid.get_least_significant_bits())


def kafka_uuid(msb: int, lsb: int) -> str:
    """A Uuid as Kafka's ``Uuid.toString`` writes it: URL-safe base64 of its 16 bytes,
    unpadded.  (confluent-kafka's ``str(Uuid)`` uses the standard alphabet, + and /.)"""
    import base64

    raw = (msb % 2**64).to_bytes(8, "big") + (lsb % 2**64).to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def set_group_config(
    bootstrap: str, group: str, config: dict[str, str], timeout_s: float = 30.0
) -> None:
    """Set group-level configs (KIP-848/KIP-932 groups), e.g. a share group's lock duration.

    Incremental SET, so other settings of the group stay as they are; the
    group need not exist yet.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in config.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    client = _client(bootstrap, timeout_s)
    try:
        futures = client.incremental_alter_configs([resource], request_timeout=timeout_s)
        for fut in futures.values():
            fut.result(timeout=timeout_s + 5)
    except KafkaException as e:
        raise AdminError(f"configure group {group!r}: {e.args[0].str()}") from e
    except TimeoutError as e:
        raise AdminError(f"configure group {group!r}: no answer within {timeout_s}s") from e


def elect_leaders(
    bootstrap: str,
    partitions: Iterable[tuple[str, int]] | None = None,
    unclean: bool = False,
    timeout_s: float = 30.0,
) -> dict[tuple[str, int], str | None]:
    """Trigger preferred (or unclean) leader election.

    Returns per partition None on success or the broker's error name
    (``ELECTION_NOT_NEEDED`` means the partition already had a fitting leader).
    ``partitions=None`` means every partition in the cluster.
    """
    from confluent_kafka import ElectionType, KafkaException, TopicPartition

    kind = ElectionType.UNCLEAN if unclean else ElectionType.PREFERRED
    tps = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
    client = _client(bootstrap, timeout_s)
    try:
        # confluent-kafka 2.16's C binding breaks on timeout keywords; the
        # defaults derive from socket.timeout.ms, which _client set from timeout_s.
        fut = client.elect_leaders(kind, tps)
        result = fut.result(timeout=timeout_s + 5)
    except KafkaException as e:
        raise AdminError(f"elect leaders ({kind.name.lower()}): {e.args[0].str()}") from e
    except TimeoutError as e:
        raise AdminError(f"elect leaders: no answer within {timeout_s}s") from e
    out: dict[tuple[str, int], str | None] = {}
    for tp, err in result.items():
        out[(tp.topic, tp.partition)] = None if err is None else _error_name(err)
    return out


def _error_name(err: Any) -> str:
    inner = err.args[0] if getattr(err, "args", None) else err
    return inner.name() if hasattr(inner, "name") else str(inner)
