"""Config rendering for KRaft and ZooKeeper nodes (pure functions, no cluster)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kafka_chaos.harness import kafka_config as kc
from kafka_chaos.harness import kafka_db
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.distribution import Distribution
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.kafka_db import node_files
from kafka_chaos.harness.node import Node, SSHTarget
from kafka_chaos.harness.spec import ClusterSpec


def make_nodes(n: int) -> list[Node]:
    return [
        Node(
            name=f"n{i}",
            node_id=i,
            address=f"10.251.9.{10 + i}",
            ssh=SSHTarget(host=f"10.251.9.{10 + i}"),
            root_dir=f"/var/lib/kc/nodes/n{i}",
        )
        for i in range(1, n + 1)
    ]


def parse(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        assert key not in out, f"duplicate key {key}"
        out[key] = value
    return out


def test_kraft_combined_mode_names_every_voter_and_its_own_listeners():
    nodes = make_nodes(3)
    props = parse(kc.kraft_server_properties(nodes[1], nodes))
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "2"
    assert props["controller.quorum.voters"] == (
        "1@10.251.9.11:9093,2@10.251.9.12:9093,3@10.251.9.13:9093"
    )
    assert props["listeners"] == "PLAINTEXT://10.251.9.12:9092,CONTROLLER://10.251.9.12:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://10.251.9.12:9092"
    assert props["controller.listener.names"] == "CONTROLLER"
    assert props["log.dirs"] == "/var/lib/kc/nodes/n2/data/kafka"
    assert props["offsets.topic.replication.factor"] == "3"
    assert props["transaction.state.log.min.isr"] == "2"
    assert props["auto.create.topics.enable"] == "false"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert int(props["broker.session.timeout.ms"]) <= 10000
    assert props["unclean.leader.election.interval.ms"] == "1000"
    assert not [k for k in props if k.startswith("zookeeper") or k == "broker.id"]


def test_internal_topics_fit_a_single_node_cluster():
    nodes = make_nodes(1)
    props = parse(kc.kraft_server_properties(nodes[0], nodes))
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["transaction.state.log.replication.factor"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"


def test_overrides_replace_defaults_and_add_keys():
    nodes = make_nodes(3)
    props = parse(
        kc.kraft_server_properties(
            nodes[0], nodes, {"replica.lag.time.max.ms": "3000", "log.flush.interval.messages": "1"}
        )
    )
    assert props["replica.lag.time.max.ms"] == "3000"
    assert props["log.flush.interval.messages"] == "1"


def test_zk_mode_broker_and_ensemble():
    nodes = make_nodes(3)
    props = parse(kc.zk_server_properties(nodes[2], nodes, {"unclean.leader.election.enable": "1"}))
    assert props["broker.id"] == "3"
    assert props["zookeeper.connect"] == "10.251.9.11:2181,10.251.9.12:2181,10.251.9.13:2181"
    assert int(props["zookeeper.session.timeout.ms"]) <= 10000
    assert props["listeners"] == "PLAINTEXT://10.251.9.13:9092"
    assert props["unclean.leader.election.enable"] == "1"
    assert "process.roles" not in props and "controller.quorum.voters" not in props

    zk = parse(kc.zookeeper_properties(nodes[0], nodes))
    assert zk["dataDir"] == "/var/lib/kc/nodes/n1/data/zookeeper"
    assert zk["clientPortAddress"] == "10.251.9.11"
    assert zk["server.1"] == "10.251.9.11:2888:3888"
    assert zk["server.3"] == "10.251.9.13:2888:3888"
    assert [kc.zookeeper_myid(n, nodes) for n in nodes] == [1, 2, 3]


def test_zk_myid_of_a_stranger_is_rejected():
    with pytest.raises(ConfigError, match="n9"):
        kc.zookeeper_myid(Node("n9", 9, "a", SSHTarget("a"), "/r"), make_nodes(3))


@pytest.mark.parametrize(
    ("version", "mode", "nodes", "heap", "message"),
    [
        ("4.4.0", "zk", 3, 512, "removed ZooKeeper"),
        ("4.0.0", "zk", 3, 512, "removed ZooKeeper"),
        ("3.9.2", "paxos", 3, 512, "cluster.mode 'paxos'"),
        ("3.9.2", "kraft", 0, 512, "cluster.nodes 0"),
        ("4.4.0", "kraft", 3, 64, "broker_heap_mb 64"),
        ("4.4", "kraft", 3, 512, "MAJOR.MINOR.PATCH"),
    ],
)
def test_validate_rejects_impossible_clusters(version, mode, nodes, heap, message):
    with pytest.raises(ConfigError, match=message):
        kc.validate(version, mode, nodes, heap)


def test_validate_accepts_supported_shapes():
    kc.validate("3.9.2", "zk", 3, 512)
    kc.validate("3.9.2", "kraft", 1, 512)
    kc.validate("4.4.0", "kraft", 5, 256)


def test_logging_follows_the_release_line():
    old = parse(kc.logging_config("3.9.2", "/r/logs/server.log"))
    assert old["log4j.appender.file.File"] == "/r/logs/server.log"
    assert old["log4j.rootLogger"].startswith("INFO")
    new = parse(kc.logging_config("4.4.0", "/r/logs/server.log"))
    assert new["appender.file.fileName"] == "/r/logs/server.log"
    assert not any(k.startswith("log4j.") for k in new)
    assert "ConsoleAppender" in kc.logging_config("3.9.2", None)
    assert parse(kc.logging_config("4.4.0", None))["appender.err.target"] == "SYSTEM_ERR"
    assert kc.logging_flag("3.9.2", "/c/l.p") == "-Dlog4j.configuration=file:/c/l.p"
    assert kc.logging_flag("4.4.0", "/c/l.p") == "-Dlog4j2.configurationFile=/c/l.p"


def test_properties_rendering():
    assert kc.render_properties({"a": True, "b": 3}) == "a=true\nb=3\n"
    with pytest.raises(ConfigError, match="single-line"):
        kc.render_properties({"a": "x\ny"})


def test_java_command_tags_the_process_and_keeps_the_classpath_glob_literal():
    cmd = kc.java_command("/r/n1", 512, "/opt/d/libs/*", "-Dx=y", "kafka.Kafka", ["/r/s.props"])
    assert cmd.startswith("java -Dkafka.chaos.root=/r/n1 -Xms512m -Xmx512m ")
    assert "'/opt/d/libs/*'" in cmd
    assert cmd.endswith("kafka.Kafka /r/s.props")
    script = kc.launcher_script("/r/run/kafka.pid", cmd)
    assert "echo $$ > /r/run/kafka.pid\nexec java " in script


def _cluster(mode: str, version: str) -> Cluster:
    return Cluster("c", "local", make_nodes(3), version, mode)


def _dist(version: str) -> Distribution:
    return Distribution(version, Path("/cache") / version, "ab" * 32, version)


def test_node_files_for_kraft():
    cluster = _cluster("kraft", "4.4.0")
    spec = ClusterSpec(broker_heap_mb=300, broker_config={"num.io.threads": "2"})
    files = node_files(cluster, cluster.nodes[0], spec, _dist("4.4.0"))
    root = "/var/lib/kc/nodes/n1"
    assert set(files) == {
        f"{root}/config/server.properties",
        f"{root}/config/kafka-log.properties",
        f"{root}/config/tools-log.properties",
        f"{root}/config/kafka-start.sh",
    }
    launcher = files[f"{root}/config/kafka-start.sh"]
    assert "-Xmx300m" in launcher and "/opt/kafka-chaos/dist/4.4.0-abababababab/libs/*" in launcher
    assert "-Dlog4j2.configurationFile=" in launcher
    assert "num.io.threads=2" in files[f"{root}/config/server.properties"]


def test_node_files_for_zookeeper_mode():
    cluster = _cluster("zk", "3.9.2")
    files = node_files(cluster, cluster.nodes[1], ClusterSpec(), _dist("3.9.2"))
    root = "/var/lib/kc/nodes/n2"
    assert files[f"{root}/data/zookeeper/myid"] == "2\n"
    zk = files[f"{root}/config/zookeeper-start.sh"]
    assert "org.apache.zookeeper.server.quorum.QuorumPeerMain" in zk and "-Xmx128m" in zk
    assert "-Dlog4j.configuration=file:" in zk
    assert "zookeeper.connect=" in files[f"{root}/config/server.properties"]


def test_cluster_ids_never_start_with_a_dash(monkeypatch):
    # The first UUID encodes to "-..." (base64url of 0xf8...), which kafka-storage
    # would read as an option; it is redrawn.
    drawn = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(int=1)])
    monkeypatch.setattr(kafka_db.uuid, "uuid4", lambda: next(drawn))
    cid = kafka_db.new_cluster_id()
    assert cid == "AAAAAAAAAAAAAAAAAAAAAQ" and len(cid) == 22


def test_slow_guests_scale_kafkas_failure_detection_and_nothing_else():
    """A cluster whose guests run 10x slower (VMs under emulation) gets 10x the
    quorum and session timings; the ISR's, other settings and user overrides stay."""
    cluster = _cluster("kraft", "4.4.0")
    spec = ClusterSpec(broker_config={"replica.lag.time.max.ms": "5000"})
    path = "/var/lib/kc/nodes/n1/config/server.properties"
    normal = parse(node_files(cluster, cluster.nodes[0], spec, _dist("4.4.0"))[path])
    for n in cluster.nodes:
        n.time_scale = 10.0
    slow = parse(node_files(cluster, cluster.nodes[0], spec, _dist("4.4.0"))[path])
    changed = {k: (normal[k], slow[k]) for k in normal if normal[k] != slow[k]}
    assert changed == {
        "broker.session.timeout.ms": ("6000", "60000"),
        "broker.heartbeat.interval.ms": ("1000", "10000"),
        "controller.quorum.election.timeout.ms": ("1000", "10000"),
        "controller.quorum.fetch.timeout.ms": ("2000", "20000"),
        "controller.quorum.request.timeout.ms": ("2000", "20000"),
        "initial.broker.registration.timeout.ms": ("60000", "600000"),
    }
    assert slow["replica.lag.time.max.ms"] == normal["replica.lag.time.max.ms"] == "5000"


def test_slow_guests_scale_zookeeper_sessions_and_ticks():
    cluster = _cluster("zk", "3.9.2")
    for n in cluster.nodes:
        n.time_scale = 4.0
    files = node_files(cluster, cluster.nodes[0], ClusterSpec(), _dist("3.9.2"))
    server = parse(files["/var/lib/kc/nodes/n1/config/server.properties"])
    ensemble = parse(files["/var/lib/kc/nodes/n1/config/zookeeper.properties"])
    assert server["zookeeper.session.timeout.ms"] == "24000"
    assert server["replica.lag.time.max.ms"] == "10000"  # not scaled
    assert ensemble["tickTime"] == "4000"  # ZooKeeper grants sessions up to 20 ticks
