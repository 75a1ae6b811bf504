"""Disaster recovery on two real local clusters: the session's cluster is dc1, the
mirror runs bring up dc2 (one broker) and the MirrorMaker node beside it, and each
scenario runs to its expected verdict (docs/mirror.md)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _cli import kafka_chaos, ops, report_path, run_args
from kafka_chaos.harness.cluster import Cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", autouse=True)
def pair_removed_after(kafka_cluster: Cluster) -> Iterator[None]:
    """dc2's broker and the MirrorMaker node go when this module is done: the rest of
    the session's tests must not share two cores with an idle fourth broker."""
    yield
    from kafka_chaos.harness import mirror_pair

    mirror_pair.destroy(kafka_cluster.name)


def run_mirror_scenario(cluster: Cluster, store: Path, name: str) -> Path:
    proc = kafka_chaos(*run_args(cluster, store, "--scenario", name))
    assert "expectation held" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return report_path(proc.stdout).parent


def mirror_stats(run: Path) -> tuple[dict, dict]:
    results = json.loads((run / "results.json").read_text())
    return results["stats"]["mirror"], results["checks"]


def test_an_internal_topic_reads_whole_below_an_open_transaction(kafka_cluster: Cluster) -> None:
    """Exactly-once MirrorMaker often has a transaction open on its offsets topic: a
    read_committed reader stops at the last stable offset, below the high watermark,
    and must count that as the end rather than wait for it (CI saw the catch-up
    never finish that way)."""
    from confluent_kafka import Producer
    from kafka_chaos.harness import admin
    from kafka_chaos.harness.spec import TopicSpec
    from kafka_chaos.workloads.mirror_sync import copied_offsets

    bootstrap = kafka_cluster.bootstrap_servers()
    topic = TopicSpec(name=f"mm2-offsets-{uuid.uuid4().hex[:6]}", partitions=1)
    admin.create_topic(bootstrap, topic, timeout_s=60)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic.name})
    try:
        producer.init_transactions(30)
        for offset, commit in ((41, True), (99, False)):
            producer.begin_transaction()
            key = ["MirrorSourceConnector", {"cluster": "dc1", "partition": 3, "topic": "chaos"}]
            producer.produce(topic.name, key=json.dumps(key), value=json.dumps({"offset": offset}))
            producer.flush(30)
            if commit:
                producer.commit_transaction(30)
        started = time.monotonic()
        assert copied_offsets(bootstrap, topic.name, "chaos", 15.0) == {3: 41}
        assert time.monotonic() - started < 10
    finally:
        producer.abort_transaction(30)
        admin.delete_topic(bootstrap, topic.name, timeout_s=30)


def test_killing_dc2s_broker_loses_nothing_and_names_dc2s_node(
    kafka_cluster: Cluster, tmp_path: Path
) -> None:
    run = run_mirror_scenario(kafka_cluster, tmp_path, "mirror-dc2-crash")
    stats, checks = mirror_stats(run)
    assert checks["mirror-lost"]["count"] == 0 and checks["failover-skip"]["count"] == 0
    assert stats["failover"] and stats["caught_up"]
    # dc2's faults ran on dc2's own schedule, numbered from 200, naming dc2's node apart
    # from dc1's n1.
    kills = [op["value"] for op in ops(run / "history.jsonl") if op["f"] == "kill"]
    assert kills and all(k["targets"] == ["dc2/n1"] and k["id"] >= 200 for k in kills), kills
    assert not any("error" in k for k in kills)
    planned = json.loads((run / "schedule-dc2.json").read_text())
    assert planned["ops"] and all(op["f"] == "kill" for op in planned["ops"])


@pytest.fixture(scope="module")
def failover_run(kafka_cluster: Cluster, tmp_path_factory) -> Path:
    return run_mirror_scenario(kafka_cluster, tmp_path_factory.mktemp("mirror"), "mirror-failover")


def test_a_failover_during_a_netsplit_skips_nothing(failover_run: Path) -> None:
    stats, checks = mirror_stats(failover_run)
    assert checks["failover-skip"]["count"] == 0 and checks["mirror-lost"]["count"] == 0
    assert stats["failover"] and stats["caught_up"]
    # MirrorMaker's checkpoints gave the group a position on dc2 in every partition...
    translated = [p for parts in stats["translated"].values() for p in parts]
    assert len(translated) == 13 and all(down >= 0 for _, _, down, _ in translated)
    # ...and it re-read what it had read since the last offset sync (at-least-once).
    reread = checks["failover-reread"]
    assert reread["count"] > 0 and reread["severity"] == "info"
    # The RPO is measured, not guessed: dc2 lacked what it had not copied when the
    # netsplit began, and every one of those values reached it after the heal.
    assert 0 <= stats["rpo_values"] == stats["copied_later"] <= stats["acked_before"]


def test_the_history_names_each_line_s_cluster(failover_run: Path) -> None:
    lines = ops(failover_run / "history.jsonl")
    topics = {op["value"]["topic"] for op in lines if op["f"] == "send"}
    assert len(topics) == 2 and sum(t.startswith("dc2/") for t in topics) == 1
    phases = [op["value"]["phase"] for op in lines if op["f"] == "failover"]
    assert phases == ["start", "end"]
    netsplit = [op for op in lines if op["f"] == "netsplit"]
    assert [op["value"]["phase"] for op in netsplit] == ["start", "end"]
    assert not any("error" in op["value"] for op in netsplit)
    caught = [op["value"] for op in lines if op["f"] == "mirror-caught-up"]
    assert len(caught) == 1 and caught[0]["caught_up"] and len(caught[0]["copied"]) == 13


def test_the_report_answers_the_seed_lab_s_questions(failover_run: Path) -> None:
    html = (failover_run / "report.html").read_text()
    assert 'id="mirror"' in html
    for question in ("What did the failover lose?", "What did it re-read?", "What did it skip?"):
        assert question in html
    assert "Offsets the failover gave the group on dc2" in html
    config = json.loads((failover_run / "config.json").read_text())
    assert config["versions"]["mirror_maker"]  # the release MirrorMaker ran
    logs = failover_run / "logs"
    assert any(logs.glob("*-mm-n1/logs/mirrormaker.log")) and any(logs.glob("*-dc2-n1/logs"))


def test_killing_mirror_maker_loses_nothing_on_dc2(kafka_cluster: Cluster, tmp_path: Path) -> None:
    run = run_mirror_scenario(kafka_cluster, tmp_path, "mirror-maker-crash")
    stats, checks = mirror_stats(run)
    schedule = json.loads((run / "schedule-mirror.json").read_text())
    kills = [op for op in schedule["ops"] if op["f"] == "mirror-kill"]
    assert kills and all(op.get("applied_s") and not op.get("error") for op in kills)
    assert stats["caught_up"] and checks["mirror-lost"]["count"] == 0
    assert checks["mirror-duplicate"]["severity"] == "info"  # at-least-once: copies may repeat


def test_exactly_once_mirror_maker_copies_each_value_once(
    kafka_cluster: Cluster, tmp_path: Path
) -> None:
    run = run_mirror_scenario(kafka_cluster, tmp_path, "mirror-eos")
    stats, checks = mirror_stats(run)
    assert stats["caught_up"] and stats["mirrored"] >= stats["dc1_log"] > 0
    assert checks["mirror-duplicate"]["severity"] == "error"  # KIP-656's promise
    assert checks["mirror-duplicate"]["count"] == 0 and checks["mirror-lost"]["count"] == 0
    config = json.loads((run / "config.json").read_text())
    assert config["mirror"]["exactly_once"]
    mm2 = next((run / "logs").glob("*-mm-n1/config/mm2.properties")).read_text()
    assert "dc2.exactly.once.source.support=enabled" in mm2
