"""The share stall detector on generated histories (workloads/share_watch.py).

Why: the watch probes a live cluster only when it says a partition stalled, so
a false stall costs a JVM and perturbs the group, and a missed one loses the
only chance to see the leader's state.  These build send and delivery
sequences by hand and ask when (and whether) each is called a stall.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.workloads.share_watch import PROBES_FILE, HistoryTail, StallDetector, StallWatch

TOPIC, GROUP = "t", "g"
LOCK_S = 15.0


def send(p: int, offset: int, at: float) -> dict[str, Any]:
    value = {"topic": TOPIC, "key": "k", "value": offset, "partition": p, "offset": offset}
    return {"time": int(at * 1e9), "type": "ok", "f": "send", "process": 0, "value": value}


def poll(records: list[tuple[int, int]], at: float, group: str = GROUP) -> dict[str, Any]:
    rs = [{"topic": TOPIC, "partition": p, "offset": o, "delivery_count": 1} for p, o in records]
    value = {"group": group, "records": rs}
    return {"time": int(at * 1e9), "type": "ok", "f": "share-poll", "process": 1, "value": value}


def steady(d: StallDetector, until: float, partitions: range, stuck: dict[int, float]) -> None:
    """One send and its delivery a second per partition; ``stuck`` partitions stop
    being delivered (but not sent to) from their time on."""
    t, offset = 0.0, 0
    while t < until:
        for p in partitions:
            d.feed(send(p, offset, t))
            if t < stuck.get(p, float("inf")):
                d.feed(poll([(p, offset)], t + 0.1))
        t, offset = t + 1.0, offset + 1


def test_a_flowing_partition_never_stalls() -> None:
    d = StallDetector(LOCK_S, topic=TOPIC)
    steady(d, 60, range(3), {})
    assert d.stalls(60.5) == []


def test_a_partition_stops_while_others_deliver_is_found_once_after_lock_plus_margin() -> None:
    d = StallDetector(LOCK_S, topic=TOPIC)
    steady(d, 20, range(3), {1: 5.0})  # partition 1's last delivery: offset 4 at 4.1 s
    assert d.stalls(4.1 + LOCK_S + 2.9) == []  # inside lock + margin
    steady_more = StallDetector(LOCK_S, topic=TOPIC)
    steady(steady_more, 40, range(3), {1: 5.0})
    found = steady_more.stalls(40.0)
    assert [(s.partition, s.since_s, s.max_delivered) for s in found] == [(1, 5.0, 4)]
    assert found[0].acked_beyond == 35 and found[0].first_pending_offset == 5
    assert steady_more.stalls(41.0) == []  # once per stall


def test_since_is_the_first_pending_ack_when_later_than_the_last_delivery() -> None:
    """A blackhole delays the producers too: the stall counts from the first record
    that was there to deliver, not from the partition's last delivery."""
    d = StallDetector(LOCK_S, topic=TOPIC)
    d.feed(send(0, 0, 0.0))
    d.feed(poll([(0, 0)], 0.5))
    d.feed(send(0, 1, 30.0))  # nothing to deliver between 0.5 s and 30 s
    for t in range(31, 60):
        d.feed(send(1, t, t))
        d.feed(poll([(1, t)], t + 0.1))
    assert d.stalls(30.0 + LOCK_S + 2.0) == []
    (s,) = d.stalls(30.0 + LOCK_S + 3.5)
    assert (s.partition, s.since_s, s.last_delivery_s) == (0, 30.0, 0.5)


def test_nothing_to_deliver_is_no_stall() -> None:
    d = StallDetector(LOCK_S, topic=TOPIC)
    d.feed(send(0, 0, 0.0))
    d.feed(poll([(0, 0)], 0.5))
    for t in range(1, 60):
        d.feed(send(1, t, t))
        d.feed(poll([(1, t)], t + 0.1))
    assert d.stalls(60.0) == []


def test_a_quiet_group_is_no_stall() -> None:
    """Between the workload and the share drain nobody consumes: no partition is singled out."""
    d = StallDetector(LOCK_S, topic=TOPIC)
    steady(d, 10, range(3), {})
    for p in range(3):
        d.feed(send(p, 100, 11.0))
    assert d.stalls(40.0) == []


def test_redelivery_of_old_offsets_ends_the_stall_and_it_can_be_found_again() -> None:
    d = StallDetector(LOCK_S, topic=TOPIC)
    steady(d, 40, range(2), {0: 5.0})
    (s,) = d.stalls(40.0)
    d.mark(s, 7)
    d.feed(poll([(0, 2)], 40.5))  # a record below the highest delivered: still a delivery
    assert d.resumed == [(GROUP, 0, 40.5, 7)]
    assert d.still_stalled() == []
    for t in range(41, 70):
        d.feed(send(1, 100 + t, t))
        d.feed(poll([(1, 100 + t)], t + 0.1))
    (again,) = d.stalls(70.0)
    assert (again.partition, again.since_s) == (0, 40.5)


def test_another_topic_and_other_groups_are_kept_apart() -> None:
    d = StallDetector(LOCK_S, topic=TOPIC)
    steady(d, 40, range(2), {})
    other = send(0, 999, 10.0)
    other["value"]["topic"] = "elsewhere"
    d.feed(other)  # not this run's topic: never pending
    assert d.stalls(40.0) == []
    d.feed(poll([(0, 50)], 41.0, group="h"))  # group h starts; partition 1 is pending for h
    for t in range(42, 70):
        d.feed(poll([(0, 50 + t)], t, group="h"))
    stalled = {(s.group, s.partition) for s in d.stalls(70.0)}
    assert ("h", 1) in stalled and all(g == "h" for g, _ in stalled)


def test_history_tail_reads_only_complete_new_lines(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    tail = HistoryTail(path)
    assert tail.read() == []
    with HistoryWriter(path) as h:
        h.append(0, "ok", "send", send(0, 0, 0)["value"])
        h.append(0, "invoke", "share-poll", None)  # not a kind the detector reads
        assert [op["f"] for op in tail.read()] == ["send"]
        h.append(1, "ok", "share-poll", poll([(0, 0)], 0)["value"])
    with open(path, "ab") as f:
        f.write(b'{"index":3,"time":5,"process":0,"type":"ok","f":"send","val')  # cut short
    assert [op["f"] for op in tail.read()] == ["share-poll"]
    with open(path, "ab") as f:
        f.write(b'ue":{"topic":"t","partition":0,"offset":1,"value":1}}\n')
    assert [op["value"]["offset"] for op in tail.read()] == [1]


def test_the_watch_probes_a_stall_once_and_records_its_end(tmp_path: Path) -> None:
    """The thread: a stall in the file is probed once, the resumption and the end written."""
    history = HistoryWriter(tmp_path / "history.jsonl", start_ns=0)
    calls: list[tuple[list[int], int]] = []

    def probe(stalls: list[Any], n: int, now_s: float) -> dict[str, Any]:
        calls.append(([s.partition for s in stalls], n))
        return {"admin": {"leaders": {}}, "member": [], "error": None}

    # Times on the history's axis are the writer's; here lines carry generated times,
    # and the watch is asked with a fixed "now" through a detector fed by hand.
    watch = StallWatch(history, tmp_path, int(LOCK_S * 1000), TOPIC, probe, check_every_s=0.01)
    steady(watch.detector, 40, range(2), {0: 5.0})
    watch.history.elapsed_ns = lambda: int(40e9)  # type: ignore[method-assign]
    watch.start()
    deadline = 200
    while not calls and deadline:
        watch._stop.wait(0.01)
        deadline -= 1
    watch.detector.feed(poll([(0, 40)], 41.0))
    watch.stop(5)
    history.close()
    assert calls == [([0], 1)]
    lines = [json.loads(x) for x in (tmp_path / PROBES_FILE).read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["probe", "resumed", "end"]
    assert lines[0]["stalls"][0]["partition"] == 0 and lines[0]["at_s"] == 40.0
    assert lines[1] == {"kind": "resumed", "group": GROUP, "partition": 0, "at_s": 41.0,
                        "probe": 1}  # fmt: skip
    assert lines[2]["still_stalled"] == []


def test_a_stall_that_lasts_is_reported_again_after_again_s() -> None:
    """A probe member may not be assigned the stalled partition; one that joins later
    (the share drain's time) may be, so a lasting stall is asked about again."""
    d = StallDetector(LOCK_S, topic=TOPIC, again_s=30.0)
    steady(d, 100, range(2), {0: 5.0})
    (first,) = d.stalls(40.0)
    assert first.repeat == 0 and d.stalls(69.0) == []
    (again,) = d.stalls(70.0)
    assert (again.partition, again.since_s, again.repeat) == (0, first.since_s, 1)


def test_share_story_tells_each_probe(tmp_path: Path) -> None:
    """``kafka-chaos share-story`` prints the probes beside the deliveries."""
    from kafka_chaos.share_story import probe_lines

    probe = {
        "kind": "probe", "probe": 1, "at_s": 40.0, "wall_ms": 0, "error": None,
        "stalls": [{"group": GROUP, "partition": 8, "since_s": 21.5}],
        "admin": {"at_s": 41.0, "group": {"members": [
            {"client_id": "run-s1", "partitions": [2, 8]},
            {"client_id": "run-s2", "partitions": [0, 1]}]},
            "leaders": {"8": {"leader": 3, "isr": [1, 2, 3]}},
            "offsets_error": "TimeoutException"},
        "member": [{"at_s": 45.0, "records": []}, {"at_s": 46.0, "records": [
            {"partition": 8, "offset": 485, "delivery_count": 2},
            {"partition": 8, "offset": 486, "delivery_count": 1}]}],
        "admin_joined": {"at_s": 47.0, "group": {"members": [
            {"client_id": "run-probe1", "partitions": [8, 9]}]}},
    }  # fmt: skip
    end = {"kind": "end", "at_s": 90.0, "probes": 1, "still_stalled": []}
    path = tmp_path / PROBES_FILE
    path.write_text("\n".join(json.dumps(x) for x in (probe, end)) + "\n")
    text = "\n".join(probe_lines(path))
    assert "probe 1: stalled 8 since 21.50 s" in text
    assert "assigned to run-s1 [8]; leaders 8: 3; share start offset/lag 8: None/None" in text
    assert "no answer: offsets_error" in text
    assert "assigned [8, 9] (of the stalled: [8]); given partition 8 offsets 485-486" in text
    assert "counts [1, 2] in 2 polls" in text and "still stalled: none" in text
