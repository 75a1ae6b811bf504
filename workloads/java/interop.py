"""Small conversions between Python and Kafka's Java client, through JPype.

Each is one crossing or a few; callers hold the JVM already (workloads/java/jvm.py).
"""

from __future__ import annotations

import array
from typing import Any

CONSUMER = "org.apache.kafka.clients.consumer."


def properties(settings: dict[str, str]) -> Any:
    """A ``java.util.Properties`` of ``settings``, as a client's constructor takes."""
    import jpype

    props = jpype.JClass("java.util.Properties")()
    for k, v in settings.items():
        props.setProperty(k, v)
    return props


def duration(seconds: float) -> Any:
    import jpype

    return jpype.JClass("java.time.Duration").ofMillis(int(seconds * 1000))


def topic_partition(topic: str, partition: int) -> Any:
    import jpype

    return jpype.JClass("org.apache.kafka.common.TopicPartition")(topic, partition)


def topic_partitions(topic: str, partitions: list[int]) -> Any:
    """A ``java.util.List`` of one topic's partitions, as ``assign`` takes."""
    import jpype

    out = jpype.JClass("java.util.ArrayList")()
    for p in partitions:
        out.add(topic_partition(topic, p))
    return out


def string_list(items: list[str]) -> Any:
    import jpype

    out = jpype.JClass("java.util.ArrayList")()
    for item in items:
        out.add(item)
    return out


def offset_map(offsets: list[list[Any]]) -> Any:
    """``[[topic, partition, offset], ...]`` as the ``Map<TopicPartition,
    OffsetAndMetadata>`` that commits take."""
    import jpype

    meta = jpype.JClass(CONSUMER + "OffsetAndMetadata")
    m = jpype.JClass("java.util.HashMap")()
    for t, p, o in offsets:
        m.put(topic_partition(t, p), meta(jpype.JLong(o)))
    return m


def pairs(partitions: Any) -> list[list[Any]]:
    """A Java collection of TopicPartition as the history lists partitions, sorted."""
    return sorted([str(tp.topic()), int(tp.partition())] for tp in partitions)


def ints(java_array: Any, typecode: str = "i") -> list[int]:
    """A Java int[] (``"i"``) or long[] (``"q"``) as a list: one copy of its bytes
    (memoryview cannot read JPype's "=i" format; ``list()`` crosses per element)."""
    return array.array(typecode, bytes(memoryview(java_array))).tolist()
