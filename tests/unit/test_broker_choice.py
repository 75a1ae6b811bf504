"""The broker is a choice of the cluster (harness/broker.py): kafka by default, or tansu.

An unknown broker, and a fault or target that makes no sense on the chosen
one, are each one line before any node is made.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka_chaos.harness import broker
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.node import Node, SSHTarget

from kafka_chaos import cli
from kafka_chaos.options import build_spec


def test_kafka_is_the_default_and_an_unknown_broker_is_one_line() -> None:
    assert build_spec().cluster.broker == "kafka"
    assert broker.named("kafka").name == "kafka"
    with pytest.raises(ConfigError, match=r"^unknown broker 'redpanda' \(known: kafka, tansu\)$"):
        build_spec({"cluster": {"broker": "redpanda"}})


def test_cluster_up_with_an_unknown_broker_says_so_and_makes_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KAFKA_CHAOS_HOME", str(tmp_path))
    code = cli.main(["cluster", "up", "--broker", "nope", "--name", "kc-unknown-broker"])
    err = capsys.readouterr().err
    assert code == 3
    assert err == "kafka-chaos: error: unknown broker 'nope' (known: kafka, tansu)\n"
    assert not (tmp_path / "clusters").exists()


def test_tansu_gets_kill_by_default_and_a_kafka_run_keeps_its_faults() -> None:
    assert build_spec({"cluster": {"broker": "tansu"}}).nemesis.faults == ["kill"]
    assert build_spec().nemesis.faults == ["kill", "partition"]
    given = {"cluster": {"broker": "tansu"}, "nemesis": {"faults": ["pause"]}}
    assert build_spec(given).nemesis.faults == ["pause"]


@pytest.mark.parametrize(
    ("nemesis", "says"),
    [
        (
            {"faults": ["corrupt-segment"]},
            "corrupt-segment does not apply to tansu: Tansu's records",
        ),
        ({"faults": ["kill"], "targets": "controller"}, "controller targets do not apply to tansu"),
        ({"faults": ["kill"], "targets": "leader"}, "leader targets do not apply to tansu"),
        ({"faults": ["unclean-election"]}, "unclean-election does not apply to tansu"),
        (
            {"schedule": [{"f": "kill", "target": "controller", "at_s": 1, "duration_s": 1}]},
            "controller targets do not apply to tansu",
        ),
    ],
)
def test_what_makes_no_sense_on_tansu_is_refused_in_one_line(nemesis: dict, says: str) -> None:
    with pytest.raises(ConfigError) as e:
        build_spec({"cluster": {"broker": "tansu"}, "nemesis": nemesis})
    assert str(e.value).startswith(says) and "\n" not in str(e.value)


def test_storage_faults_are_tansus_own_and_kafka_refuses_them_in_one_line() -> None:
    tansu = build_spec({"cluster": {"broker": "tansu"}, "nemesis": {"faults": ["storage-kill"]}})
    assert broker.refusal(tansu) is None
    with pytest.raises(ConfigError) as e:
        build_spec({"nemesis": {"faults": ["kill", "storage-partition"]}})
    assert str(e.value) == (
        "storage-partition does not apply to kafka: Apache Kafka has no storage node: "
        "its brokers keep their own logs"
    )


def test_the_same_faults_on_kafka_are_not_refused_by_the_broker() -> None:
    spec = build_spec({"nemesis": {"faults": ["kill"], "targets": "controller"}})
    assert broker.refusal(spec) is None


def test_tansu_needs_the_local_backend_and_no_kafka_config() -> None:
    with pytest.raises(ConfigError, match="local backend only"):
        broker.named("tansu").validate(
            build_spec().cluster.__class__(broker="tansu", backend="ssh")
        )
    with pytest.raises(ConfigError, match="server.properties"):
        build_spec({"cluster": {"broker": "tansu", "broker_config": {"a": "b"}}})


def _node(name: str, i: int) -> Node:
    return Node(name, i, f"10.0.0.{i}", SSHTarget(f"10.0.0.{i}"), f"/x/{name}")


def test_a_cluster_keeps_its_broker_and_storage_nodes_and_old_records_are_kafka(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KAFKA_CHAOS_HOME", str(tmp_path))
    c = Cluster("t", "local", [_node("n1", 1)], "4.4.0", "kraft", {}, "tansu", [_node("n2", 2)])
    c.save()
    back = Cluster.load("t")
    assert back.broker == "tansu" and [n.name for n in back.storage] == ["n2"]
    assert back.bootstrap_servers() == "10.0.0.1:9092"  # the storage node serves no clients
    path = tmp_path / "clusters" / "t" / "cluster.json"
    data = json.loads(path.read_text())
    del data["broker"], data["storage"]  # as written before the choice existed
    path.write_text(json.dumps(data))
    old = Cluster.load("t")
    assert old.broker == "kafka" and old.storage == []


def test_a_run_names_the_broker_of_the_cluster_it_reuses(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KAFKA_CHAOS_HOME", str(tmp_path))
    c = Cluster("k9", "local", [_node("n1", 1)], "4.4.0", "kraft", {}, "tansu", [_node("n2", 2)])
    c.save()
    spec = build_spec({"cluster": {"name": "k9", "nodes": 1},
                       "topic": {"replication_factor": 1, "min_insync_replicas": 1}})  # fmt: skip
    assert spec.cluster.broker == "tansu" and spec.nemesis.faults == ["kill"]
