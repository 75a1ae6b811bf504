"""Built-in scenario presets: named bundles of cluster, topic, client and fault settings.

Each preset is a layer of options (see kafka_chaos/options.py) plus the verdict
it expects.  The report states whether the expectation held, so a nightly
suite can keep a configuration whose loss Kafka documents (unclean leader
election: valid, its loss reported as warnings) next to the safe one.
"""

from __future__ import annotations

from typing import Any

from kafka_chaos.harness.errors import ConfigError

# The seed labs run 13 partitions at RF=3 and 1000 msg/s.
SEED_LAB_TOPIC = {"partitions": 13, "replication_factor": 3, "min_insync_replicas": 2}

UNCLEAN_FAULTS: dict[str, Any] = {
    # The classic reproduction, as one scripted fault (nemeses.unclean): cut the
    # leader of partition 0 off from the other brokers until the ISR shrinks to
    # it, keep writing, then cut it off from clients too so a stale follower is
    # elected uncleanly, then heal.
    "faults": ["unclean-election"],
    "interval_s": 5.0,
    "duration_s": 40.0,
    "targets": "leader",
}

# Idempotence off: after an unclean election an idempotent producer's sequence
# numbers no longer match the truncated log and librdkafka fails fatally,
# which would end the writes that show the loss.
UNCLEAN_PRODUCER: dict[str, Any] = {
    "acks": "all",
    "enable_idempotence": False,
    "rate": 500.0,
    "workers": 2,
}
# Assign mode: the fault also cuts the group coordinator off from its
# followers, and a group left without owners for the whole fault would judge
# the coordinator's availability, not the durability these presets are about.
UNCLEAN_CONSUMER: dict[str, Any] = {"mode": "assign"}

# Share groups (KIP-932): three members acknowledging explicitly, a few
# releases and rejects so redelivery and archiving happen in every run.
SHARE_CONSUMER: dict[str, Any] = {
    "mode": "share",
    "groups": 1,
    "workers_per_group": 3,
    "share_release_probability": 0.05,
    "share_reject_probability": 0.02,
}
SHARE_PRODUCER: dict[str, Any] = {"rate": 300.0}

# Transactions: four processes, Jepsen's four micro-ops, one abort in ten.
TXN: dict[str, Any] = {"processes": 4, "max_ops": 4, "abort_probability": 0.1}

# Disaster recovery (docs/mirror.md): dc1 is the run's cluster, dc2 one node, one group
# of two members that fails over to dc2 at MirrorMaker's translated offsets.
MIRROR_RUN: dict[str, Any] = {
    "workload": "mirror",
    "time_limit_s": 32.0,
    "topic": SEED_LAB_TOPIC,
    "producer": {"rate": 300.0},
    "consumer": {"groups": 1, "workers_per_group": 2},
}
MIRROR: dict[str, Any] = {"enabled": True, "dc2_nodes": 1}
# The seed lab's netsplit of dc1 (three nodes) from 12 s to 24 s, once the group's
# commits have been checkpointed: the failover comes during it, and the heal lets
# MirrorMaker copy what dc1 still held.
DC1_NETSPLIT = [
    {"id": 0, "f": "netsplit", "at_s": 12.0, "duration_s": 12.0, "targets": ["n1", "n2", "n3"]}
]

# MirrorMaker killed for 2 s about every 8 s: it needs ~5 s to start its connectors,
# so a shorter gap leaves it no time to copy anything between kills.
MIRROR_KILLS: dict[str, Any] = {"faults": [], "interval_s": 8.0, "duration_s": 2.0}
# dc2's one broker killed for 3 s about every 8 s (its restart takes a few seconds more).
DC2_KILLS: dict[str, Any] = {"faults": [], "interval_s": 8.0, "duration_s": 3.0}


# Power loss (nemeses/power_loss.py): broker data on lazyfs, every broker (or a
# minority) SIGKILLed with the writes it never fsynced dropped, twice a run.
def power_loss(targets: str) -> dict[str, Any]:
    return {"faults": ["power-loss"], "targets": targets, "interval_s": 8.0, "duration_s": 8.0}


# Idempotence off, as for the unclean presets: these presets ask what reaches
# the disk, and with an idempotent librdkafka producer a run under a full
# outage also counts the client's own duplicates.  power-loss-all-flush lost
# nothing on 2026-11-28 yet was invalid: 191 values stored twice, every one
# "sent again by their producer under a bumped epoch" (replicas.json), the
# shape of evidence/epoch-bump-duplicates-blackhole-4.4.0 (messages timed out
# in the client, epoch bumped, the request re-sent from sequence 0).  Without
# idempotence a retried duplicate is "Legal for a non-idempotent producer that
# retries" (the duplicate check), so it is reported, at severity info.
POWER_LOSS_PRODUCER: dict[str, Any] = {"acks": "all", "enable_idempotence": False}
LAZYFS_CLUSTER: dict[str, Any] = {"disk": "lazyfs"}
# Broker-wide, so __consumer_offsets and the producer state fsync as well as the topic.
FLUSH_EACH: dict[str, Any] = {
    "disk": "lazyfs",
    "broker_config": {"log.flush.interval.messages": "1"},
}

# Disk faults (nemeses/disk_full.py, nemeses/corrupt_segment.py), one broker at a time
# at RF=3, min.insync.replicas=2, acks=all; why each is expected valid is in
# docs/disk-faults.md, quoting Kafka's documentation.
TMPFS_CLUSTER: dict[str, Any] = {"disk": "tmpfs"}


def one_disk_fault(kind: str) -> dict[str, Any]:
    return {"faults": [kind], "targets": "random", "interval_s": 8.0, "duration_s": 10.0}


# Tansu (docs/brokers.md): every broker leads every partition and keeps nothing,
# so the faults are broker kills and faults of its one PostgreSQL.  Tansu 0.6.0
# documents no delivery guarantee of its own; it calls itself "a drop-in
# replacement for Apache Kafka" (README, v0.6.0), so each expects what Kafka's
# protocol promises: a send acknowledged with acks=all is durable (valid).
# tansu-txn is not declared: 0.6.0's ApiVersions has no EndTxn.
TANSU: dict[str, Any] = {"broker": "tansu"}
TANSU_FAULTS: dict[str, Any] = {"targets": "random", "interval_s": 10.0, "duration_s": 8.0}
# Idempotence off: the broker-kill preset asks about acks alone, and a retried
# send stored twice is legal for a non-idempotent producer (reported as info).
TANSU_PLAIN_PRODUCER: dict[str, Any] = {"acks": "all", "enable_idempotence": False}
TANSU_IDEMPOTENT_PRODUCER: dict[str, Any] = {"acks": "all", "enable_idempotence": True}


SCENARIOS: dict[str, dict[str, Any]] = {
    "broker-failover": {
        "description": "Kill the leader of a partition; leadership moves, nothing acked is lost.",
        "expected_verdict": "valid",
        "time_limit_s": 45.0,
        "topic": SEED_LAB_TOPIC,
        "nemesis": {"faults": ["kill"], "targets": "leader", "interval_s": 8.0, "duration_s": 12.0},
    },
    "consumer-failover": {
        "description": "One group of 3 consumers; one crashes and restarts, coverage holds.",
        "expected_verdict": "valid",
        "time_limit_s": 40.0,
        "topic": SEED_LAB_TOPIC,
        "consumer": {"groups": 1, "workers_per_group": 3, "crash_interval_s": 12.0},
        "nemesis": {"faults": []},
    },
    "consumer-failover-kip848": {
        "description": "Consumer failover under the new group protocol (KIP-848, Kafka 4): "
        "the broker reassigns a crashed member's partitions; coverage holds.",
        "expected_verdict": "valid",
        "time_limit_s": 40.0,
        "topic": SEED_LAB_TOPIC,
        "consumer": {
            "groups": 1,
            "workers_per_group": 3,
            "crash_interval_s": 12.0,
            "group_protocol": "consumer",
        },
        "nemesis": {"faults": []},
    },
    "pubsub-vs-queue": {
        "description": "Two groups each read every message; within a group, each once.",
        "expected_verdict": "valid",
        "time_limit_s": 30.0,
        "topic": SEED_LAB_TOPIC,
        "consumer": {"groups": 2, "workers_per_group": 2},
        "nemesis": {"faults": []},
    },
    "pubsub-vs-queue-share": {
        "description": "The queue side with Kafka's real queue: two share groups each accept "
        "every message once, load-shared between each group's members.",
        "expected_verdict": "valid",
        "time_limit_s": 30.0,
        "topic": SEED_LAB_TOPIC,
        "producer": SHARE_PRODUCER,
        "consumer": {**SHARE_CONSUMER, "groups": 2, "workers_per_group": 2},
        "nemesis": {"faults": []},
    },
    "share-group-consumer-crash": {
        "description": "A share-group member crashes holding records, again and again; "
        "their locks expire and other members get them, none lost or accepted twice.",
        "expected_verdict": "valid",
        "time_limit_s": 45.0,
        "topic": SEED_LAB_TOPIC,
        "producer": SHARE_PRODUCER,
        "consumer": {**SHARE_CONSUMER, "crash_interval_s": 12.0},
        "nemesis": {"faults": []},
    },
    "share-group-broker-kill": {
        "description": "Kill the leader of the busiest partition, the broker that also "
        "keeps that share-partition's state, again and again; every acknowledged record "
        "is still accepted once.",
        "expected_verdict": "valid",
        "time_limit_s": 50.0,
        "topic": SEED_LAB_TOPIC,
        "producer": SHARE_PRODUCER,
        "consumer": SHARE_CONSUMER,
        "nemesis": {"faults": ["kill"], "targets": "leader", "interval_s": 8.0, "duration_s": 12.0},
    },
    "rate-under-failure": {
        "description": "1000 msg/s must hold while one node is down.",
        "expected_verdict": "valid",
        "time_limit_s": 45.0,
        "topic": SEED_LAB_TOPIC,
        "producer": {"rate": 1000.0},
        "nemesis": {"faults": ["kill"], "targets": "random", "interval_s": 8.0, "duration_s": 15.0},
        "checker": {"availability_min_rate": 800.0},
    },
    # Valid: the loss is counted and shown (lost-write, acked-lost, inconsistent-offsets),
    # as warnings, because unclean.leader.election.enable's doc allows it ("may result in
    # data loss"); bench/unclean_repro.py and the integration test count the loss itself.
    "unclean-leader-election": {
        "description": "ISR shrinks to the leader, which acks alone, then a stale follower "
        "is elected uncleanly: acknowledged writes are lost, as unclean election allows "
        "(warnings, not errors).",
        "expected_verdict": "valid",
        "time_limit_s": 75.0,
        "topic": {
            "partitions": 3,
            "replication_factor": 3,
            "min_insync_replicas": 1,
            "unclean_leader_election": True,
        },
        "producer": UNCLEAN_PRODUCER,
        "consumer": UNCLEAN_CONSUMER,
        "nemesis": UNCLEAN_FAULTS,
    },
    "unclean-leader-election-safe": {
        "description": "The same faults with min.insync.replicas=2 and unclean election "
        "off: writes may fail, but no acknowledged write may be lost.",
        "expected_verdict": "valid",
        "time_limit_s": 75.0,
        "topic": {
            "partitions": 3,
            "replication_factor": 3,
            "min_insync_replicas": 2,
            "unclean_leader_election": False,
        },
        "producer": UNCLEAN_PRODUCER,
        "consumer": UNCLEAN_CONSUMER,
        "nemesis": UNCLEAN_FAULTS,
    },
    "power-loss-all": {
        "description": "Every broker loses power at once (lazyfs drops what it never fsynced) "
        "with Kafka's defaults: it never fsyncs (log.flush.interval.messages unbounded), so "
        "acknowledged writes are lost at any replication factor.",
        "expected_verdict": "invalid",
        "time_limit_s": 40.0,
        "cluster": LAZYFS_CLUSTER,
        "topic": SEED_LAB_TOPIC,
        "producer": POWER_LOSS_PRODUCER,
        "consumer": UNCLEAN_CONSUMER,
        "nemesis": power_loss("all"),
    },
    "power-loss-all-flush": {
        "description": "The same power losses with log.flush.interval.messages=1: every message "
        "is fsynced before it is acknowledged, so none may be lost.",
        "expected_verdict": "valid",
        "time_limit_s": 40.0,
        "cluster": FLUSH_EACH,
        "topic": SEED_LAB_TOPIC,
        "producer": POWER_LOSS_PRODUCER,
        "consumer": UNCLEAN_CONSUMER,
        "nemesis": power_loss("all"),
    },
    "power-loss-minority": {
        "description": "A minority of brokers loses power, Kafka's defaults and "
        "min.insync.replicas=2: every acknowledged write is in memory on a broker that "
        "stays up, so none may be lost.",
        "expected_verdict": "valid",
        "time_limit_s": 40.0,
        "cluster": LAZYFS_CLUSTER,
        "topic": SEED_LAB_TOPIC,
        "producer": POWER_LOSS_PRODUCER,
        "consumer": UNCLEAN_CONSUMER,
        "nemesis": power_loss("minority"),
    },
    "disk-full": {
        "description": "One broker's only log directory fills up (a real ENOSPC): Kafka takes "
        "it offline and halts the broker; the heal frees it and restarts it. With RF=3, "
        "min.insync.replicas=2 and acks=all every acknowledged write is on another replica, "
        "so none may be lost.",
        "expected_verdict": "valid",
        "time_limit_s": 45.0,
        "cluster": TMPFS_CLUSTER,
        "topic": SEED_LAB_TOPIC,
        "consumer": UNCLEAN_CONSUMER,
        "nemesis": one_disk_fault("disk-full"),
    },
    "corrupt-segment": {
        "description": "One replica's newest segment gets bits flipped or its tail cut while its "
        "broker is down; on restart Kafka's CRC check truncates it and the replica fetches "
        "the rest again from the leader, so no acknowledged write may be lost.",
        "expected_verdict": "valid",
        "time_limit_s": 45.0,
        "topic": SEED_LAB_TOPIC,
        "consumer": UNCLEAN_CONSUMER,
        "nemesis": one_disk_fault("corrupt-segment"),
    },
    "txn-clean": {
        "description": "Transactions of 1-4 sends and polls, some aborted, clients crashing "
        "mid-transaction; read_committed sees exactly the committed ones.",
        "expected_verdict": "valid",
        "workload": "txn",
        "time_limit_s": 40.0,
        "txn": TXN,
        "consumer": {"crash_interval_s": 10.0},
        "nemesis": {"faults": []},
    },
    "txn-kill": {
        "description": "Kill the transaction coordinator's broker (which also leads a third "
        "of the partitions) again and again; transactions stay all-or-nothing.",
        "expected_verdict": "valid",
        "workload": "txn",
        "time_limit_s": 60.0,
        "txn": TXN,
        "nemesis": {
            "faults": ["kill"],
            "targets": "coordinator",
            "interval_s": 6.0,
            "duration_s": 8.0,
        },
    },
    "txn-pause-hunt": {
        "description": "Hunt the KAFKA-17754 class: pause the coordinator's broker while "
        "transactions are in flight, and stall clients past the transaction timeout, so "
        "delayed requests may land in a later transaction. No expected verdict: "
        "bench/txn_hunt.py measures how often it finds aborted reads, lost writes or torn "
        "transactions.",
        "expected_verdict": None,
        "workload": "txn",
        "time_limit_s": 60.0,
        "txn": {
            **TXN,
            "transaction_timeout_ms": 3000,
            "client_timeout_s": 5.0,
            "stall_probability": 0.05,
            "stall_s": 4.0,
        },
        "producer": {"request_timeout_ms": 2000, "delivery_timeout_ms": 3000},
        "nemesis": {
            "faults": ["pause"],
            "targets": "coordinator",
            "interval_s": 3.0,
            "duration_s": 5.0,
        },
    },
    # --- hunts (issue 35): no expected verdict; bench/hunt.py measures them ---------
    "hunt-txn-stale-endtxn": {
        "description": "Hunt KAFKA-17754 with the fault it needs: blackhole clients' requests "
        "to the transaction coordinator for longer than the clients wait, so an EndTxn or a "
        "produce they gave up on arrives after the heal, into a later transaction.",
        "expected_verdict": None,
        "workload": "txn",
        "time_limit_s": 60.0,
        "txn": {**TXN, "transaction_timeout_ms": 10000, "client_timeout_s": 5.0},
        "producer": {"request_timeout_ms": 2000, "delivery_timeout_ms": 4000},
        "nemesis": {
            "faults": ["blackhole"],
            "targets": "coordinator",
            "interval_s": 4.0,
            "duration_s": 8.0,
        },
    },
    "hunt-epoch-bump-dup": {
        "description": "Hunt librdkafka#4953: an idempotent producer whose requests to the "
        "partition leader vanish past its timeouts bumps its epoch and resends; requests "
        "that arrive late must not leave acknowledged values twice in the log.",
        "expected_verdict": None,
        "time_limit_s": 50.0,
        "topic": SEED_LAB_TOPIC,
        "producer": {"request_timeout_ms": 2000, "delivery_timeout_ms": 5000},
        "nemesis": {
            "faults": ["blackhole"],
            "targets": "leader",
            "interval_s": 4.0,
            "duration_s": 8.0,
        },
    },
    "hunt-commit-lost": {
        "description": "Hunt KAFKA-20634: kill or blackhole the leader of the group's "
        "__consumer_offsets partition while members commit after every poll and crash; "
        "every member reads the group's committed offsets after each assignment and at the "
        "end, and none may be below a commit that had returned success.",
        "expected_verdict": None,
        "time_limit_s": 60.0,
        "topic": SEED_LAB_TOPIC,
        "consumer": {
            "groups": 1,
            "workers_per_group": 3,
            "crash_interval_s": 10.0,
            "commit": "manual",
        },
        "nemesis": {
            "faults": ["kill", "blackhole"],
            "targets": "group-coordinator",
            "interval_s": 5.0,
            "duration_s": 8.0,
        },
    },
    "hunt-share-failover": {
        "description": "Hunt share-group state under failover (KAFKA-19476 class): kill or "
        "blackhole the broker keeping the share group's state, apart from the partition "
        "leaders, while members crash: no record lost, none accepted twice.",
        "expected_verdict": None,
        "time_limit_s": 60.0,
        "topic": SEED_LAB_TOPIC,
        "producer": SHARE_PRODUCER,
        # The stall probe (docs/coordinators.md) is on where stalls are hunted.
        "consumer": {**SHARE_CONSUMER, "crash_interval_s": 15.0, "share_probe": True},
        "nemesis": {
            "faults": ["kill", "blackhole"],
            "targets": "share-coordinator",
            "interval_s": 6.0,
            "duration_s": 10.0,
        },
    },
    "hunt-kip848-coordinator": {
        "description": "Hunt KIP-848 groups under coordinator failover (librdkafka PR #5604 "
        "class): kill or blackhole the group coordinator while members crash; ownership "
        "never overlaps and no commit skips unread records.",
        "expected_verdict": None,
        "time_limit_s": 60.0,
        "topic": SEED_LAB_TOPIC,
        "consumer": {
            "groups": 1,
            "workers_per_group": 3,
            "crash_interval_s": 15.0,
            "group_protocol": "consumer",
        },
        "nemesis": {
            "faults": ["kill", "blackhole"],
            "targets": "group-coordinator",
            "interval_s": 6.0,
            "duration_s": 10.0,
        },
    },
    "abort-rewind": {
        "description": "Consume-transform-produce with the rewind after an abort turned off "
        "(KAFKA-17582): the consumer's position stays past the aborted input, whose offsets "
        "a later transaction commits, so inputs are lost to the pipeline.",
        "expected_verdict": "invalid",
        "workload": "txn",
        "time_limit_s": 40.0,
        "producer": {"rate": 50.0},
        "txn": {**TXN, "mode": "ctp", "rewind": False, "abort_probability": 0.2},
        "nemesis": {"faults": []},
    },
    "mirror-failover": {
        "description": "The seed lab's disaster recovery: dc1 suffers a netsplit, the producers "
        "and the group fail over to dc2 at MirrorMaker 2's translated offsets; nothing is "
        "skipped, and the RPO and the re-reads are measured.",
        "expected_verdict": "valid",
        **MIRROR_RUN,
        "nemesis": {"faults": ["netsplit"], "schedule": DC1_NETSPLIT},
        "mirror": {**MIRROR, "failover_at_s": 15.0},
    },
    "mirror-maker-crash": {
        "description": "MirrorMaker 2 is killed mid-stream, again and again, and restarted; after "
        "it catches up dc2 holds everything dc1 does (copies twice are allowed), and a "
        "failover at the end skips nothing.",
        "expected_verdict": "valid",
        **MIRROR_RUN,
        "nemesis": MIRROR_KILLS,
        "mirror": {**MIRROR, "faults": ["mirror-kill"], "failover_at_s": 26.0},
    },
    "mirror-dc2-crash": {
        "description": "dc2's broker is killed for 3 s about every 8 s, before and after the "
        "failover: MirrorMaker 2 retries, the failed-over clients ride it out; after the "
        "catch-up dc2 holds everything dc1 does, and nothing is skipped.",
        "expected_verdict": "valid",
        **MIRROR_RUN,
        "nemesis": DC2_KILLS,
        "mirror": {**MIRROR, "dc2_faults": ["kill"], "failover_at_s": 15.0},
    },
    "mirror-eos": {
        "description": "Exactly-once MirrorMaker 2 (KIP-656) killed mid-stream, again and again: "
        "dc2 holds every value of dc1 exactly once.",
        "expected_verdict": "valid",
        **MIRROR_RUN,
        "nemesis": MIRROR_KILLS,
        "mirror": {
            **MIRROR,
            "exactly_once": True,
            "faults": ["mirror-kill"],
            "failover_at_s": 26.0,
        },
    },
    "tansu-broker-kill": {
        "description": "Tansu: brokers SIGKILLed one at a time, a non-idempotent producer "
        "with acks=all; clients go on through another broker and nothing acked is lost "
        "(no documented Tansu guarantee: Kafka's acks=all contract).",
        "expected_verdict": "valid",
        "time_limit_s": 60.0,
        "cluster": TANSU,
        "producer": TANSU_PLAIN_PRODUCER,
        "nemesis": {**TANSU_FAULTS, "faults": ["kill"]},
    },
    "tansu-storage-partition": {
        "description": "Tansu: one broker cut off from PostgreSQL, both ways, three times "
        "a minute; an acked send is stored once at its acked offset (no documented Tansu "
        "guarantee: Kafka's acks=all and idempotence contract).",
        "expected_verdict": "valid",
        "time_limit_s": 60.0,
        "cluster": TANSU,
        "producer": TANSU_IDEMPOTENT_PRODUCER,
        "nemesis": {**TANSU_FAULTS, "faults": ["storage-partition"]},
    },
    "tansu-idempotent": {
        "description": "Tansu: idempotent producers under broker kills, PostgreSQL crashes "
        "and pauses; nothing acked is lost or stored twice (no documented Tansu "
        "guarantee: Kafka's idempotent-producer contract).",
        "expected_verdict": "valid",
        "time_limit_s": 60.0,
        "cluster": TANSU,
        "producer": TANSU_IDEMPOTENT_PRODUCER,
        "nemesis": {**TANSU_FAULTS, "faults": ["kill", "storage-kill", "storage-pause"]},
    },
}


def scenario_layer(name: str) -> dict[str, Any]:
    """The option layer for a preset; the test is named after it."""
    try:
        preset = dict(SCENARIOS[name])
    except KeyError as e:
        raise ConfigError(
            f"unknown scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}"
        ) from e
    preset.pop("description", None)
    return {"name": name, "scenario": name, **preset}


def describe() -> list[tuple[str, str, str]]:
    return [(n, s["expected_verdict"], s["description"]) for n, s in SCENARIOS.items()]
