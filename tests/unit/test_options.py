"""Run options: layering, validation and the errors users see."""

import argparse

import pytest
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.spec import TestSpec

from kafka_chaos.options import add_run_options, build_spec, cli_overrides, load_mapping
from kafka_chaos.scenarios import SCENARIOS, scenario_layer


def parse(argv):
    parser = argparse.ArgumentParser()
    add_run_options(parser)
    return parser.parse_args(argv)


def test_flags_override_scenario_and_defaults():
    args = parse(["--acks", "1", "--faults", "kill,pause", "--nodes", "5", "--idempotence", "no"])
    spec = build_spec(scenario_layer("broker-failover"), cli_overrides(args))
    assert spec.producer.acks == "1"
    assert spec.producer.enable_idempotence is False
    assert spec.nemesis.faults == ["kill", "pause"]
    assert spec.cluster.nodes == 5
    assert spec.topic.partitions == 13  # from the preset
    assert spec.scenario == "broker-failover"
    assert spec.expected_verdict == "valid"


def test_no_faults_flag():
    spec = build_spec(cli_overrides(parse(["--faults", "none"])))
    assert spec.nemesis.faults == []


def test_unknown_option_in_config_is_named(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("producer:\n  akcs: all\n")
    with pytest.raises(ConfigError, match=r"config\.producer\.akcs: unknown option"):
        build_spec(load_mapping(path))


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("producer:\n  acks: [all\n")
    with pytest.raises(ConfigError, match=r"run\.yaml: line \d+: not valid YAML"):
        load_mapping(path)


@pytest.mark.parametrize(
    "layer, message",
    [
        ({"cluster": {"mode": "zk", "kafka_version": "4.4.0"}}, "ZooKeeper mode needs Kafka 3"),
        ({"topic": {"replication_factor": 5}}, "exceeds cluster.nodes"),
        ({"topic": {"min_insync_replicas": 4}}, "min_insync_replicas"),
        ({"producer": {"acks": "2"}}, "acks must be"),
        ({"cluster": {"backend": "ssh"}}, "needs --inventory"),
    ],
)
def test_contradictions_are_rejected(layer, message):
    with pytest.raises(ConfigError, match=message):
        build_spec(layer)


def test_a_client_jar_needs_the_java_client_and_a_jar(tmp_path):
    jar = tmp_path / "kafka-clients-4.4.0-patched.jar"
    jar.write_bytes(b"")
    with pytest.raises(ConfigError, match="replaces Kafka's Java client: set --client java"):
        build_spec({"client_jar": str(jar)})
    with pytest.raises(ConfigError, match="no such jar file"):
        build_spec({"client_jar": str(tmp_path / "missing.jar"), "producer": {"client": "java"}})
    spec = build_spec(cli_overrides(parse(["--client", "java", "--client-jar", str(jar)])))
    assert spec.client_jar == str(jar)


def test_every_scenario_builds_and_declares_an_expectation():
    for name in SCENARIOS:
        spec = build_spec(scenario_layer(name))
        # A hunt has no expected verdict: its bench script measures how often it finds one.
        expected = (None,) if "hunt" in name else ("valid", "invalid")
        assert spec.expected_verdict in expected
        assert spec.name == name


def test_unknown_scenario_lists_known_ones():
    with pytest.raises(ConfigError, match="broker-failover"):
        scenario_layer("nope")


def test_config_round_trips_with_run_metadata(tmp_path):
    spec = build_spec(scenario_layer("unclean-leader-election"))
    path = tmp_path / "config.json"
    spec.save(path, extra={"versions": {"kafka": "4.4.0"}, "topic_name_used": "x"})
    assert TestSpec.load(path) == spec


def test_unclean_presets_use_assign_mode_and_no_idempotence():
    for name in ("unclean-leader-election", "unclean-leader-election-safe"):
        spec = build_spec(scenario_layer(name))
        assert spec.consumer.mode == "assign"
        assert spec.producer.enable_idempotence is False
        assert spec.nemesis.faults == ["unclean-election"]


@pytest.mark.parametrize(
    "consumer,version,message",
    [
        (
            {"group_protocol": "consumer", "mode": "assign"},
            "4.4.0",
            "needs consumer.mode subscribe",
        ),
        ({"group_protocol": "consumer"}, "3.9.2", "needs Kafka 4.0 or later"),
        ({"group_protocol": "eager"}, "4.4.0", "is not classic or consumer"),
    ],
)
def test_bad_group_protocol_settings_are_refused(consumer, version, message):
    with pytest.raises(ConfigError, match=message):
        build_spec({"consumer": consumer, "cluster": {"kafka_version": version}})


def test_the_new_group_protocol_leaves_timing_to_the_broker():
    from confluent_kafka import Consumer
    from kafka_chaos.workloads.consumer import consumer_config

    spec = build_spec({"consumer": {"group_protocol": "consumer"}})
    conf = consumer_config(spec, "127.0.0.1:9", "g", "c")
    assert conf["group.protocol"] == "consumer"
    assert "session.timeout.ms" not in conf and "heartbeat.interval.ms" not in conf
    Consumer(conf).close()  # librdkafka accepts it (it refuses the client-side keys)


def _saved_cluster(home, name: str, backend: str, state: dict | None = None) -> None:
    import json

    d = home / "clusters" / name
    d.mkdir(parents=True)
    saved = {"name": name, "backend": backend, "nodes": [], "backend_state": state or {}}
    (d / "cluster.json").write_text(json.dumps(saved))


def test_a_run_on_an_existing_cluster_keeps_its_backend(tmp_path, monkeypatch):
    """`cluster up --backend vagrant` then `run --cluster-name vms --scenario ...` runs on
    the VMs; the default backend would have replaced them with namespaces."""
    monkeypatch.setenv("KAFKA_CHAOS_HOME", str(tmp_path))
    _saved_cluster(tmp_path, "vms", "vagrant")
    _saved_cluster(tmp_path, "hosts", "ssh", {"inventory": "/etc/kc/hosts.toml"})
    named = scenario_layer("unclean-leader-election")
    assert build_spec(named, {"cluster": {"name": "vms"}}).cluster.backend == "vagrant"
    hosts = build_spec({"cluster": {"name": "hosts"}}).cluster
    assert (hosts.backend, hosts.inventory) == ("ssh", "/etc/kc/hosts.toml")
    # An explicit backend still decides, and a new cluster gets the default.
    assert build_spec({"cluster": {"name": "vms", "backend": "local"}}).cluster.backend == "local"
    assert build_spec({"cluster": {"name": "new"}}).cluster.backend == "local"
