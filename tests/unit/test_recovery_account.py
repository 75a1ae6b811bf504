"""The brokers' account of a power loss and the lost values' provenance, on a real run's files.

tests/unit/data/power-loss-all is cut from a real power-loss-all run (Kafka
4.4.0, 3 lazyfs nodes, 2026-11-28): partition 3 of its topic only, with the
three brokers' server.log lines about that partition, its acks and final
drain, its cluster-state samples and its replica dumps.  The checker's own
count of the partition's lost values is kept beside them
(acked-lost-partition-3.json), so the provenance is checked against an
independent count, not against itself.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_chaos.forensics import disk_account, provenance
from kafka_chaos.forensics.recovery_log import recovery_lines

DATA = Path(__file__).parent / "data" / "power-loss-all"
TOPIC = "chaos-20261128t070228z"


def server_log(node: str) -> list[str]:
    return (DATA / "logs" / node / "logs" / "server.log").read_text().splitlines()


def test_recovery_lines_of_a_real_power_loss() -> None:
    found = list(recovery_lines(server_log("n1"), TOPIC))
    kinds = {f.kind for f in found}
    assert {"recovering-unflushed", "loaded", "unclean-election", "producer-state"} <= kinds
    assert all(f.partition == 3 for f in found)  # __consumer_offsets-3 is another topic
    loaded = [f for f in found if f.kind == "loaded"]
    # Two restarts after two power losses, each "Completed load of Log(...)" of partition 3.
    assert [f.time_ms is not None for f in loaded] == [True, True]
    assert all(f.offset == 0 and "log-end-offset 0" in f.line for f in loaded)
    unflushed = [f for f in found if f.kind == "recovering-unflushed"]
    assert [f.segment for f in unflushed] == [0, 0]


def test_lines_saying_nothing_happened_are_not_kept() -> None:
    lines = server_log("n2")
    no_effect = [ln for ln in lines if "has no effect" in ln and TOPIC in ln]
    assert no_effect, "the fixture holds Kafka's 'Truncating to N has no effect' lines"
    assert not any("has no effect" in f.line for f in recovery_lines(lines, TOPIC))


def test_a_topic_sharing_the_prefix_is_not_ours() -> None:
    line = (
        "[2026-11-28 07:02:57,875] INFO Completed load of Log(dir=/d/chaos-x-3, topicId=a, "
        "topic=chaos-x, partition=3, highWatermark=0, lastStableOffset=0, logStartOffset=0, "
        "logEndOffset=7) with 1 segments, local-log-start-offset 0 and log-end-offset 7 in 5ms"
    )
    assert [f.offset for f in recovery_lines([line], "chaos-x")] == [7]
    assert list(recovery_lines([line], "chaos")) == []


def test_corruption_lines_from_loglaoders_format() -> None:
    # LogLoader.java's "Corruption found in segment {}, truncating to offset {}" (a
    # corrupt-segment fault's row), with the logger prefix the real lines carry.
    line = (
        "[2026-11-28 07:10:00,000] WARN [LogLoader partition=t-2, dir=/d] Corruption found in "
        "segment 0, truncating to offset 41 (org.apache.kafka.storage.internals.log.LogLoader)"
    )
    (found,) = recovery_lines([line], "t")
    assert (found.kind, found.partition, found.segment, found.offset) == ("corruption", 2, 0, 41)


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # The harness log stamps local time; the fixture's run was on a UTC machine.
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    dest = tmp_path / "run"
    shutil.copytree(DATA, dest)
    yield dest
    monkeypatch.undo()
    time.tzset()


def test_each_power_loss_gets_the_lines_of_its_own_restart(run_dir: Path) -> None:
    result = disk_account.account(run_dir, TOPIC)  # anchored by the harness log's line
    assert [f["id"] for f in result["faults"]] == [0, 1]
    first, second = result["faults"]
    for fault in (first, second):
        assert sorted(fault["nodes"]) == ["n1", "n2", "n3"]
        for node in fault["nodes"].values():
            assert node["recovered_log_end"] == {"3": 0}
            assert node["counts"]["recovering-unflushed"] == 1
            assert all(fault["start_s"] <= ln["history_s"] for ln in node["lines"])
    # A line belongs to the first cut until the second one starts.
    assert all(ln["history_s"] < second["start_s"] for ln in first["nodes"]["n1"]["lines"])
    # The controller's unclean recovery of the partition, after the second cut only.
    assert first["nodes"]["n1"]["unclean_elections"] == []
    assert second["nodes"]["n1"]["unclean_elections"] == [3]


def test_no_anchor_is_said_not_guessed(run_dir: Path) -> None:
    (run_dir / "harness.log").unlink()
    result = disk_account.account(run_dir, TOPIC)
    assert result["faults"] == [] and "anchor" in result["error"]


def test_provenance_counts_what_the_checker_counted(run_dir: Path) -> None:
    disk_account.write(run_dir, TOPIC)
    result = provenance.provenance(run_dir, TOPIC)
    (checked,) = json.loads((run_dir / "acked-lost-partition-3.json").read_text())
    assert result["lost"] == checked["count"]
    (part,) = result["partitions"]
    assert (part["first"], part["last"]) == (checked["first"], checked["last"])
    for node in ("n1", "n2", "n3"):
        tally = part["nodes"][node]
        # Every replica came back from the cut with log end 0 and holds none of them now.
        assert tally["came_back_without:yes"] == checked["count"]
        assert tally["holds_now:no"] == checked["count"]
        assert tally.get("holds_now:yes", 0) == 0


def test_held_at_ack_only_where_the_isr_samples_around_it_agree(run_dir: Path) -> None:
    disk_account.write(run_dir, TOPIC)
    result = provenance.provenance(run_dir, TOPIC)
    samples = provenance.StateSamples(run_dir / "cluster-state.jsonl", TOPIC)
    for value in result["values"]:
        before, after, _ = samples.around(3, value["acked_s"])
        for r in value["replicas"]:
            in_both = bool(before and after) and all(
                r["broker_id"] in s["isr"] for s in (before, after)
            )
            assert r["held_at_ack"] is (True if in_both else None)
            assert r["cut"] == 0  # the first power loss after every one of these acks


def test_without_acks_all_nothing_is_claimed_held(run_dir: Path) -> None:
    config = json.loads((run_dir / "config.json").read_text())
    config["producer"]["acks"] = "1"
    (run_dir / "config.json").write_text(json.dumps(config))
    disk_account.write(run_dir, TOPIC)
    result = provenance.provenance(run_dir, TOPIC)
    assert all(r["held_at_ack"] is None for v in result["values"] for r in v["replicas"])


MINORITY = Path(__file__).parent / "data" / "power-loss-minority"
MINORITY_TOPIC = "chaos-20261128t071114z"


def test_a_minority_cut_is_told_by_its_target_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """power-loss-minority (real run, partition 3): n2 then n3 lost power; each came
    back with nothing of the partition on disk and fetched it again from the leader."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        result = disk_account.account(MINORITY, MINORITY_TOPIC)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert [(f["id"], f["targets"]) for f in result["faults"]] == [(0, ["n2"]), (1, ["n3"])]
    for fault, node in zip(result["faults"], ("n2", "n3"), strict=True):
        assert list(fault["nodes"]) == [node]
        assert fault["nodes"][node]["recovered_log_end"] == {"3": 0}
        assert fault["nodes"][node]["unclean_elections"] == []


LOAD_N1 = (  # a real line: n1 of power-loss-all, 2026-11-28, loading after the first cut
    "[2026-11-28 13:31:19,922] INFO Completed load of Log(dir=/d/chaos-x-2, topicId=p, "
    "topic=chaos-x, partition=2, highWatermark=0, lastStableOffset=0, logStartOffset=0, "
    "logEndOffset=0) with 1 segments, local-log-start-offset 0 and log-end-offset 0 in 40ms "
    "(4/23 completed in /d) (org.apache.kafka.storage.internals.log.LogManager)"
)


def _two_cuts_of_n1(run: Path, applied: tuple[float, float] | None) -> dict:
    """Two power losses of n1 (starts 5.36 s and 21.228 s, as in that run) and n1's
    load line, logged 0.28 s after the second began (the anchor puts it there)."""
    (run / "logs" / "n1" / "logs").mkdir(parents=True)
    (run / "logs" / "n1" / "logs" / "server.log").write_text(LOAD_N1 + "\n")
    ops = []
    for i, (start, end) in enumerate(((5.36, 13.802), (21.228, 29.419))):
        for phase, at in (("start", start), ("end", end)):
            value = {"phase": phase, "id": i, "targets": ["n1"], "at_s": at}
            ops.append({"index": len(ops), "time": int(at * 1e9), "process": "nemesis",
                        "type": "info", "f": "power-loss", "value": value})  # fmt: skip
    (run / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    if applied is not None:
        sched = {"ops": [{"id": i, "applied_s": a} for i, a in enumerate(applied)]}
        (run / "schedule.json").write_text(json.dumps(sched))
    wall_ms = 1795872679922.0  # the line's own stamp, 2026-11-28 13:31:19,922 UTC
    return disk_account.account(run, "chaos-x", {"history_s": 21.51, "wall_ms": wall_ms})


def test_lines_logged_before_the_next_cut_took_effect_belong_to_the_cut_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker was still loading its logs when the second cut began; its SIGKILL
    landed later (applied_s), so the log end it reports is what the first cut left."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        first, second = _two_cuts_of_n1(tmp_path / "a", (6.183, 21.693))["faults"]
        assert first["nodes"]["n1"]["recovered_log_end"] == {"2": 0}
        assert second["nodes"]["n1"]["recovered_log_end"] == {}
        # Without schedule.json (an older run), the fault's start is the boundary.
        first, second = _two_cuts_of_n1(tmp_path / "b", None)["faults"]
        assert first["nodes"]["n1"]["recovered_log_end"] == {}
        assert second["nodes"]["n1"]["recovered_log_end"] == {"2": 0}
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_replica_cut_again_while_loading_came_back_from_the_next_cut() -> None:
    """n1 loaded partition 2 but not 5 before the second cut: for 5 it came back
    from the second; with no load at all, the first cut and "unknown"."""
    faults = [
        {"id": 0, "targets": ["n1"], "start_s": 5.36,
         "nodes": {"n1": {"recovered_log_end": {"2": 0}}}},
        {"id": 1, "targets": ["n1"], "start_s": 21.2,
         "nodes": {"n1": {"recovered_log_end": {"2": 0, "5": 0}}}},
    ]  # fmt: skip
    assert [(f["id"], end) for f, end in [provenance.came_back(faults, "n1", 2, 1.0)]] == [(0, 0)]
    assert [(f["id"], end) for f, end in [provenance.came_back(faults, "n1", 5, 1.0)]] == [(1, 0)]
    cut, end = provenance.came_back(faults, "n1", 7, 1.0)
    assert (cut["id"], end) == (0, None)
    assert provenance.came_back(faults, "n2", 2, 1.0) == (None, None)


def _unplace(run_dir: Path, values: set[int], read: dict[int, int], log_start: int = 0) -> None:
    """Rewrite the run's history: the acks of ``values`` without an offset, as the
    recorder writes a batch answered DUPLICATE_SEQUENCE_NUMBER (workloads/
    delivery_offsets.py); a group member's poll reading ``read`` {value: offset} of
    partition 3 before the drain; the drain's log start ``log_start``."""
    path = run_dir / "history.jsonl"
    ops = [json.loads(line) for line in path.read_text().splitlines()]
    out = []
    for op in ops:
        v = op["value"]
        if op["f"] == "send" and op["type"] == "ok" and v["value"] in values:
            v["offset"] = None
        if op["f"] == "drain":
            v["log_start"] = log_start
        if op["f"] == "poll" and v.get("final") and read:
            records = [{"topic": TOPIC, "partition": 3, "offset": o, "key": None, "value": x}
                       for x, o in read.items()]  # fmt: skip
            out.append({**op, "process": 50, "value": {"records": records}})
        out.append(op)
    path.write_text("".join(json.dumps(op) + "\n" for op in out))


def test_acks_without_an_offset_are_lost_too_and_placed_where_read(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Values 3, 1303 and 6919 (offsets 0, 100, 532 of the checker's 533 lost) acked
    without an offset, 1303 read at 100 by a consumer: still 533 lost, 1303 at 100,
    the other two at no offset (so nothing is said of their offset's fate)."""
    monkeypatch.setattr(provenance, "MAX_VALUES", 1000)  # every value, not the first 200
    _unplace(run_dir, {3, 1303, 6919}, read={1303: 100})
    disk_account.write(run_dir, TOPIC)
    result = provenance.provenance(run_dir, TOPIC)
    (checked,) = json.loads((run_dir / "acked-lost-partition-3.json").read_text())
    assert result["lost"] == checked["count"]
    (part,) = result["partitions"]
    assert (part["first"], part["last"]) == (1, 531)  # the placed ones
    by_value = {v["value"]: v for v in result["values"]}
    assert by_value[1303]["offset"] == 100
    lost_last = provenance.lost_acks(run_dir / "history.jsonl", TOPIC)[-2:]
    assert [(a.value, a.offset) for a in lost_last] == [(3, None), (6919, None)]
    unplaced = by_value[3]
    assert unplaced["offset"] is None and unplaced["replicas"]
    for r in unplaced["replicas"]:
        assert r["came_back_without"] is None and r["now_at_offset"] is None
        assert r["holds_now"] is False  # by value: no replica holds it now


def test_an_ack_without_an_offset_never_read_is_not_lost_above_a_log_start(
    run_dir: Path,
) -> None:
    """With the log start at 1, retention may have removed 3 and 6919 (no offset, never
    read): the checker leaves them undecided, so they are not among the lost; 1303,
    read at 100, is."""
    _unplace(run_dir, {3, 1303, 6919}, read={1303: 100}, log_start=1)
    lost = {a.value for a in provenance.lost_acks(run_dir / "history.jsonl", TOPIC)}
    (checked,) = json.loads((run_dir / "acked-lost-partition-3.json").read_text())
    assert len(lost) == checked["count"] - 2 and 1303 in lost and not {3, 6919} & lost
