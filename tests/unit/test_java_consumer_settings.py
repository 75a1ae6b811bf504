"""The Java consumer's settings mean what librdkafka's mean, or are refused in one line;
a poll's records reach the history as librdkafka's do."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.workloads.consumer import POLL_BATCH, SOCKET_TIMEOUT_MS, consumer_config
from kafka_chaos.workloads.java.consumer import java_consumer_properties

from kafka_chaos.options import add_run_options, build_spec, cli_overrides

ROOT = Path(__file__).resolve().parents[2]


def test_every_consumer_setting_has_its_java_twin() -> None:
    spec = build_spec({"consumer": {"client": "java", "session_timeout_ms": 12000}})
    java = java_consumer_properties(spec, "n1:9092", "g0", "run-c0")
    rdkafka = consumer_config(spec, "n1:9092", "g0", "run-c0")
    same = (
        "bootstrap.servers", "group.id", "client.id", "auto.offset.reset",
        "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
    )  # fmt: skip
    for key in same:
        assert java[key] == str(rdkafka[key]), key
    assert java["request.timeout.ms"] == str(SOCKET_TIMEOUT_MS)  # librdkafka's socket.timeout.ms
    assert java["max.poll.records"] == str(POLL_BATCH)
    # The client's auto commit reports nothing: the worker commits, and records it.
    assert rdkafka["enable.auto.commit"] is True and java["enable.auto.commit"] == "false"


def test_the_new_group_protocol_leaves_timing_to_the_broker() -> None:
    spec = build_spec(
        {"cluster": {"kafka_version": "4.4.0"}, "consumer": {"group_protocol": "consumer"}}
    )
    java = java_consumer_properties(spec, "n1:9092", "g0", "c")
    assert java["group.protocol"] == "consumer"
    assert "session.timeout.ms" not in java and "heartbeat.interval.ms" not in java


def test_contradictions_are_refused_as_for_librdkafka() -> None:
    spec = build_spec({"consumer": {"client": "java"}})
    spec.consumer.session_timeout_ms = 10
    with pytest.raises(ConfigError, match="session_timeout_ms too small"):
        java_consumer_properties(spec, "n1:9092", "g0", "c")


def test_what_the_java_client_cannot_read_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="consumer.client must be librdkafka or java"):
        build_spec({"consumer": {"client": "kafka-python"}})
    with pytest.raises(ConfigError, match="set both with --client"):
        build_spec({"workload": "txn", "consumer": {"client": "java"}})
    with pytest.raises(ConfigError, match="runs the queue and txn workloads"):
        build_spec({"workload": "no-such", "consumer": {"client": "java"}})


def test_client_sets_both_roles_and_the_role_flags_one_each() -> None:
    parser = argparse.ArgumentParser()
    add_run_options(parser)
    both = cli_overrides(parser.parse_args(["--client", "java"]))
    assert both == {"producer": {"client": "java"}, "consumer": {"client": "java"}}
    one = cli_overrides(parser.parse_args(["--consumer-client", "java"]))
    assert one == {"consumer": {"client": "java"}}
    assert build_spec(both).java_client and build_spec(one).java_client
    assert not build_spec({}).java_client


DECODE = textwrap.dedent(
    """
    import json, sys, tempfile
    from pathlib import Path
    from kafka_chaos.workloads.java import jvm
    jvm.start("4.4.0", Path(tempfile.mkdtemp()))
    import jpype
    from kafka_chaos.workloads.java.consumer import records_of
    C = "org.apache.kafka.clients.consumer."
    TP = jpype.JClass("org.apache.kafka.common.TopicPartition")
    Rec = jpype.JClass(C + "ConsumerRecord")
    by_partition = jpype.JClass("java.util.HashMap")()
    for topic, partition, rows in json.loads(sys.stdin.read()):
        batch = jpype.JClass("java.util.ArrayList")()
        for offset, key, value in rows:
            k = None if key is None else jpype.JArray(jpype.JByte)(key.encode())
            v = None if value is None else jpype.JArray(jpype.JByte)(value.encode())
            batch.add(Rec(topic, partition, jpype.JLong(offset), k, v))
        by_partition.put(TP(topic, partition), batch)
    records = jpype.JClass(C + "ConsumerRecords")(by_partition, jpype.JClass("java.util.HashMap")())
    polled = jpype.JClass("kafkachaos.Polled")(records)
    print(json.dumps(records_of(polled)))
    """
)


def test_a_polls_records_reach_the_history_as_librdkafkas_do() -> None:
    """Real ConsumerRecords in a real JVM (a child: one JVM per process), through
    Polled.java and records_of: null keys and values, foreign payloads, two topics."""
    batches = [
        ["t", 0, [[5, "1", "17 xxx"], [6, None, "18 x"], [7, "ü", None]]],
        ["u", 3, [[2**40, "9", "not ours"]]],
    ]
    done = subprocess.run(
        [sys.executable, "-c", DECODE], cwd=ROOT, input=json.dumps(batches),
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    got = sorted(json.loads(done.stdout), key=lambda r: (r["topic"], r["offset"]))
    assert got == [
        {"topic": "t", "partition": 0, "offset": 5, "key": "1", "value": 17},
        {"topic": "t", "partition": 0, "offset": 6, "key": None, "value": 18},
        {"topic": "t", "partition": 0, "offset": 7, "key": "ü", "value": None},
        {"topic": "u", "partition": 3, "offset": 2**40, "key": "9", "value": None},
    ]


def test_a_share_member_takes_librdkafkas_share_settings() -> None:
    from kafka_chaos.workloads.java.share_consumer import java_share_properties
    from kafka_chaos.workloads.share_consumer import share_config

    java = java_share_properties("n1:9092", "s0", "run-s3")
    rdkafka = share_config("n1:9092", "s0", "run-s3")
    for key in ("bootstrap.servers", "group.id", "client.id", "share.acknowledgement.mode"):
        assert java[key] == str(rdkafka[key]), key
    assert java["request.timeout.ms"] == str(rdkafka["socket.timeout.ms"])
    spec = build_spec(
        {"cluster": {"kafka_version": "4.4.0"}, "consumer": {"client": "java", "mode": "share"}}
    )
    assert spec.java_client


def test_client_both_is_the_run_commands_alone() -> None:
    """``run --client both`` makes two runs; as a spec's setting (a config file, a suite
    cell) it means nothing, and is refused in one line."""
    parser = argparse.ArgumentParser()
    add_run_options(parser)
    both = cli_overrides(parser.parse_args(["--client", "both"]))
    assert both == {"producer": {"client": "both"}, "consumer": {"client": "both"}}
    with pytest.raises(ConfigError, match="producer.client must be librdkafka or java"):
        build_spec(both)
