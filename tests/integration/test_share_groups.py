"""Share groups (KIP-932) on a real 4.4 cluster: the presets assert their expected
verdicts, and the history shows the mechanism each one is about."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from _cli import kafka_chaos, ops, run_args, runs_by_client, shapes
from kafka_chaos.harness.cluster import Cluster
from test_scenarios import run_scenario

pytestmark = pytest.mark.integration


def accepted_by_group(history: list[dict]) -> dict[str, dict[int, list[int]]]:
    """Per share group, each value's committed accepts and rejects (who made them)."""
    out: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for op in history:
        if op["f"] != "share-ack" or op["type"] != "ok":
            continue
        failed = {(f["topic"], f["partition"]) for f in op["value"]["failed"]}
        for ack in op["value"]["acks"]:
            if (
                ack["type"] in ("accept", "reject")
                and (ack["topic"], ack["partition"]) not in failed
            ):
                out[op["value"]["group"]][ack["value"]].append(op["process"])
    return out


def drain_members(history: list[dict]) -> set[int]:
    """The share drain's fresh members (their polls say ``final``): they join after the
    workload stopped, so what they accept says nothing of how its members shared it."""
    return {
        op["process"] for op in history
        if op["f"] == "share-poll" and isinstance(op["value"], dict) and op["value"].get("final")
    }  # fmt: skip


def first_deliveries(history: list[dict], group: str) -> dict[int, float | None]:
    """Each of ``group``'s workload members: seconds from the first send to its first
    delivery (None: nothing delivered while the workload ran)."""
    start = min(op["time"] for op in history if op["f"] == "send")
    drain = drain_members(history)
    out: dict[int, float | None] = {}
    for op in history:
        value = op["value"] if isinstance(op["value"], dict) else {}
        if op["f"] != "share-poll" or value.get("group") != group or op["process"] in drain:
            continue
        if op["type"] == "ok" and value["records"] and out.get(op["process"]) is None:
            out[op["process"]] = round((op["time"] - start) / 1e9, 1)
        else:
            out.setdefault(op["process"], None)
    return out


def acked_values(history: list[dict]) -> set[int]:
    return {op["value"]["value"] for op in history if op["f"] == "send" and op["type"] == "ok"}


def test_two_share_groups_each_accept_everything_load_shared_on_both_clients(
    kafka_cluster: Cluster, tmp_path
):
    """The same preset and seed on librdkafka's share consumer and on Kafka's own
    ``KafkaShareConsumer`` (``--client both``): each group saw everything once, its
    members shared the load, and the two histories have the same line shapes. The
    crash and leader-kill tests below run librdkafka's.

    The preset's whole 30 s: a member's first delivery waits on its join, two
    heartbeats (3 s each) and the share coordinator initializing the group's state,
    5-8 s after the first send on a loaded machine and over 12 s in a suite
    rehearsal, whose 12 s run then left every record to the share drain's members."""
    proc = kafka_chaos(*run_args(
        kafka_cluster, tmp_path, "--scenario", "pubsub-vs-queue-share", "--client", "both",
    ))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.count("expectation held") == 2, proc.stdout
    runs = runs_by_client(proc.stdout)
    for client, run in runs.items():
        history = ops(run / "history.jsonl")
        accepted = accepted_by_group(history)
        assert len(accepted) == 2, client
        acked = acked_values(history)
        for group, values in accepted.items():  # each group saw everything, once
            assert acked <= set(values), f"{client} {group} missed {len(acked - set(values))}"
            assert all(len(procs) == 1 for procs in values.values()), (client, group)
            # shared between the workload's members: the drain's do not count
            members = {p for procs in values.values() for p in procs} - drain_members(history)
            assert len(members) >= 2, (
                f"{client} {group}: members {sorted(members)} took everything; first "
                f"delivery (s after the first send) by member: {first_deliveries(history, group)}"
            )
        assert all(
            r["delivery_count"] >= 1
            for op in history
            if op["f"] == "share-poll" and op["type"] == "ok"
            for r in op["value"]["records"]
        ), f"{client}: a delivery without its count"
        results = json.loads((run / "results.json").read_text())
        assert results["checks"]["share-lost"]["count"] == 0, client
    java, librdkafka = (shapes(runs[c] / "history.jsonl") for c in ("java", "librdkafka"))
    assert java == librdkafka, java ^ librdkafka


def test_a_crashed_members_records_come_back_after_their_lock(kafka_cluster: Cluster, tmp_path):
    # 25 s of the preset's 45, crashing every 8 s: still crashes holding records.
    run = run_scenario(
        kafka_cluster, tmp_path, "share-group-consumer-crash",
        "--time-limit", "25", "--consumer-crash-interval", "8",
    )  # fmt: skip
    history = ops(run / "history.jsonl")
    crashed = {op["process"]: op["time"] for op in history if op["f"] == "crash"}
    assert crashed, "no member crashed"
    held: dict[int, set[tuple]] = {}
    for op in history:
        if op["f"] == "share-poll" and op["type"] == "ok" and op["process"] in crashed:
            held[op["process"]] = {
                (r["topic"], r["partition"], r["offset"]) for r in op["value"]["records"]
            }
        if op["f"] == "share-ack" and op["type"] == "invoke" and op["process"] in crashed:
            held[op["process"]] = set()
    stranded = {(rec, crashed[p]) for p, recs in held.items() for rec in recs}
    assert stranded, "no crashed member held records when it crashed"
    deliveries = defaultdict(list)  # record -> (time, delivery count) of every delivery
    for op in history:
        if op["f"] == "share-poll" and op["type"] == "ok":
            for r in op["value"]["records"]:
                deliveries[(r["topic"], r["partition"], r["offset"])].append(
                    (op["time"], r["delivery_count"])
                )
    never_back = [
        rec
        for rec, crash_time in stranded
        if not any(t > crash_time and count >= 2 for t, count in deliveries[rec])
    ]
    assert not never_back, f"held by a crashed member, never delivered again: {never_back[:5]}"
    results = json.loads((run / "results.json").read_text())
    assert results["checks"]["share-missing-redelivery"]["count"] == 0
    assert results["checks"]["share-double-acquire"]["count"] == 0


def test_killing_the_share_partition_leader_loses_nothing(kafka_cluster: Cluster, tmp_path: Path):
    # 30 s of the preset's 50: the first kill (at 4-12 s, for 12 s) always fits.
    run = run_scenario(kafka_cluster, tmp_path, "share-group-broker-kill", "--time-limit", "30")
    history = ops(run / "history.jsonl")
    kills = [op for op in history if op["f"] == "kill" and op["value"].get("phase") == "start"]
    assert kills, "no broker was killed"
    results = json.loads((run / "results.json").read_text())
    assert results["checks"]["share-lost"]["valid"] is True
    drains = [op["value"] for op in history if op["f"] == "share-drain"]
    assert drains and all(d["complete"] for d in drains), drains
    # What the share coordinators persisted, decoded: a state for every share-partition.
    kept = json.loads((run / "coordinators.json").read_text())
    assert kept["error"] is None, kept["error"]
    states = kept["share_partitions"]
    assert sorted(s["partition"] for s in states) == list(range(13)), states
    assert all(s["writes"] > 0 and s["start_offset"] is not None for s in states), states
    assert (run / "share-state.jsonl").stat().st_size > 0
