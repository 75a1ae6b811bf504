"""The queue workload on a healthy cluster: everything acked is read, offsets agree.

One 30 s run at 1000 msg/s (two groups, a consumer crash every 10 s to
exercise failover bookkeeping, no broker faults), then the final drain.  The
history is read back through the contract's reader and judged directly.
"""

from __future__ import annotations

import collections
import json
import time

import pytest
from kafka_chaos.harness import admin
from kafka_chaos.harness.history import HistoryWriter, read_history
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.workloads.queue import QueueWorkload

pytestmark = pytest.mark.integration

DURATION_S = 30
RATE = 1000.0


@pytest.fixture(scope="module")
def clean_run(kafka_cluster, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("queue-clean")
    spec = TestSpec(name="queue-clean", seed=7)
    spec.topic.name = f"queue-clean-{int(time.time())}"
    spec.producer.rate = RATE
    spec.consumer.groups = 2
    spec.consumer.crash_interval_s = 10.0
    bootstrap = kafka_cluster.bootstrap_servers()
    admin.create_topic(bootstrap, spec.topic, timeout_s=60)
    try:
        with HistoryWriter(run_dir / "history.jsonl") as history:
            workload = QueueWorkload(spec, bootstrap, history, run_dir, live=False)
            workload.start()
            time.sleep(DURATION_S)
            summary = workload.stop()
            drain = workload.final_drain(120)
    finally:
        admin.delete_topic(bootstrap, spec.topic.name, timeout_s=30)
    ops = list(read_history(run_dir / "history.jsonl"))  # validates every line
    return spec, summary, drain, ops, run_dir


def test_every_send_completes_and_is_acked(clean_run):
    _, summary, _, ops, _ = clean_run
    invokes = {o["value"]["value"]: o for o in ops if o["f"] == "send" and o["type"] == "invoke"}
    done = collections.Counter(
        o["value"]["value"] for o in ops if o["f"] == "send" and o["type"] != "invoke"
    )
    assert len(invokes) == summary.sends_invoked > 0
    assert set(done) == set(invokes) and set(done.values()) == {1}
    oks = [o for o in ops if o["f"] == "send" and o["type"] == "ok"]
    assert not [o for o in ops if o["f"] == "send" and o["type"] == "fail"]
    assert len(oks) >= 0.99 * len(invokes), "indeterminate sends on a healthy cluster"
    for o in oks:  # the completion repeats the invoke's fields
        assert {k: o["value"][k] for k in ("topic", "key", "value")} == invokes[
            o["value"]["value"]
        ]["value"]


def test_final_drain_reads_every_acked_value_at_its_offset(clean_run):
    spec, _, drain, ops, _ = clean_run
    assert drain.complete, drain
    assert set(drain.reached) == set(range(spec.topic.partitions))
    acked = {
        o["value"]["value"]: (o["value"]["partition"], o["value"]["offset"])
        for o in ops
        if o["f"] == "send" and o["type"] == "ok"
    }
    final_reads = {}
    for o in ops:
        if o["f"] == "poll" and o["type"] == "ok" and o["value"].get("final"):
            for r in o["value"]["records"]:
                final_reads[r["value"]] = (r["partition"], r["offset"])
    assert not set(acked) - set(final_reads), "acked values missing from the final drain"
    assert all(final_reads[v] == pos for v, pos in acked.items())


def test_offsets_are_consistent_across_acks_and_reads(clean_run):
    _, _, _, ops, _ = clean_run
    seen: dict[tuple[int, int], set[int]] = collections.defaultdict(set)
    for o in ops:
        if o["f"] == "send" and o["type"] == "ok":
            seen[(o["value"]["partition"], o["value"]["offset"])].add(o["value"]["value"])
        elif o["f"] == "poll" and o["type"] == "ok":
            for r in o["value"]["records"]:
                assert r["value"] is not None, r
                seen[(r["partition"], r["offset"])].add(r["value"])
    assert seen
    assert {pos: vs for pos, vs in seen.items() if len(vs) > 1} == {}


def test_send_rate_within_ten_percent_of_target(clean_run):
    _, summary, _, ops, _ = clean_run
    assert not summary.rate_shortfall, summary.rate_message
    times = [o["time"] for o in ops if o["f"] == "send" and o["type"] == "invoke"]
    rate = len(times) / ((times[-1] - times[0]) / 1e9)
    assert abs(rate - RATE) <= 0.10 * RATE, f"history shows {rate:.0f} sends/s"


def test_consumers_record_membership_and_crash_under_new_processes(clean_run):
    spec, summary, _, ops, _ = clean_run
    by_process = collections.defaultdict(list)
    for o in ops:
        if o["process"] != "nemesis":
            by_process[o["process"]].append(o)
    consumer_procs = [p for p, os_ in by_process.items() if os_[0]["f"] in ("subscribe", "assign")]
    groups = {os_[0]["value"]["group"] for os_ in by_process.values() if os_[0]["f"] == "subscribe"}
    assert len(groups) == spec.consumer.groups
    crashes = [o for o in ops if o["f"] == "crash"]
    assert len(crashes) == summary.consumer_crashes >= 2
    for c in crashes:  # a crash ends its process: nothing after it
        assert by_process[c["process"]][-1] is c
    assert len(consumer_procs) >= spec.consumer.groups * spec.consumer.workers_per_group + 2
    polled = sum(len(o["value"]["records"]) for o in ops if o["f"] == "poll" and o["type"] == "ok")
    assert polled > 0
    assert any(o["f"] == "rebalance" and o["value"]["assigned"] for o in ops)
    assert any(o["f"] == "commit" and o["type"] == "ok" for o in ops)


def test_cluster_state_sampled(clean_run):
    spec, _, _, _, run_dir = clean_run
    samples = [json.loads(x) for x in (run_dir / "cluster-state.jsonl").read_text().splitlines()]
    good = [s for s in samples if s["error"] is None]
    assert len(samples) >= DURATION_S // 2 and len(good) >= 0.9 * len(samples)
    last = good[-1]
    assert isinstance(last["controller"], int)
    assert sorted(p["partition"] for p in last["partitions"]) == list(range(spec.topic.partitions))
    assert all(p["leader"] in p["isr"] for p in last["partitions"])
