"""Coordinator targeting hashes a transactional.id as Kafka does.

The expected partitions were checked against a live 4.4.0 cluster: for
``probe-N-tx0`` (N = 0..3) ``kafka-transactions describe`` named as
coordinator exactly the leader of the partition computed here.
"""

from __future__ import annotations

import pytest
from kafka_chaos.harness.kafka_names import transactional_id
from kafka_chaos.nemeses.base import TARGET_MODES
from kafka_chaos.nemeses.targeting import coordinator_partition, java_string_hash


@pytest.mark.parametrize(
    "text,expected",
    [
        ("", 0),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("é", 233),
        ("polygenelubricants", -2147483648),
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_of_min_int_hash_is_zero_as_kafka_utils_abs_says() -> None:
    assert coordinator_partition("polygenelubricants", 10) == 0


@pytest.mark.parametrize("n,partition", [(0, 0), (1, 1), (2, 2), (3, 3)])
def test_partitions_seen_on_a_live_cluster(n: int, partition: int) -> None:
    assert coordinator_partition(f"probe-{n}-tx0", 10) == partition


def test_the_target_mode_exists_and_names_the_workloads_ids() -> None:
    assert "coordinator" in TARGET_MODES
    assert transactional_id("chaos", 0) == "chaos-tx0"


def test_group_and_share_coordinator_targets_name_the_runs_first_group() -> None:
    from kafka_chaos.harness.spec import ConsumerSpec, TestSpec, TopicSpec
    from kafka_chaos.nemeses.targeting import share_partition_key
    from kafka_chaos.workloads.registry import first_group

    assert {"group-coordinator", "share-coordinator"} <= set(TARGET_MODES)
    queue = TestSpec(name="t", topic=TopicSpec(name="chaos-1"))
    assert first_group(queue) == "chaos-1-g0"
    share = TestSpec(name="t", topic=TopicSpec(name="chaos-1"), consumer=ConsumerSpec(mode="share"))
    assert first_group(share) == "chaos-1-s0"
    assert first_group(TestSpec(name="t", topic=TopicSpec(name="chaos-1"), workload="txn")) is None
    # Kafka's SharePartitionKey.asCoordinatorKey: "%s:%s:%d" of group, topic id, partition.
    assert share_partition_key("g", "AAAAAAdbzRUAAAAAOt5osQ", 3) == "g:AAAAAAdbzRUAAAAAOt5osQ:3"


def test_a_topic_id_is_written_as_kafka_writes_it() -> None:
    """Seen on a live 4.4.0 cluster: share state for a topic whose id confluent-kafka
    prints as 12laVv5LSSiujgnqeEa/Bg went to the __share_group_state partition that
    12laVv5LSSiujgnqeEa_Bg (URL-safe, as Kafka's Uuid.toString) hashes to."""
    import base64

    from kafka_chaos.harness.admin import kafka_uuid

    raw = base64.b64decode("12laVv5LSSiujgnqeEa/Bg==")
    msb = int.from_bytes(raw[:8], "big", signed=True)
    lsb = int.from_bytes(raw[8:], "big", signed=True)
    assert kafka_uuid(msb, lsb) == "12laVv5LSSiujgnqeEa_Bg"
    group = "probe-5a435287-s0"
    assert coordinator_partition(f"{group}:12laVv5LSSiujgnqeEa_Bg:0", 50) == 16
