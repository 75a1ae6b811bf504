"""Decoded coordinator records -> the state the broker persisted (forensics.coordinator_state).

The lines are DumpLogSegments' own output on Kafka 4.4.0 (shortened to the
fields read), so a change of its format shows here first.
"""

from __future__ import annotations

import json

from kafka_chaos.forensics.coordinator_state import (
    commit_summary,
    parse,
    share_row,
    share_summary,
    state_at,
)

G, T = "chaos-20261127t102027z-s0", "OT5FI9o8Sly4cqhlVrzpKg"


def share_line(offset: int, kind: int, start: int, batches: list, epoch: int | None = None) -> str:
    key = {"type": str(kind), "data": {"groupId": G, "topicId": T, "partition": 10}}
    data = {"snapshotEpoch": 0, "leaderEpoch": 0, "startOffset": start}
    if epoch is not None:
        data["stateEpoch"] = epoch
    data["stateBatches"] = [
        {"firstOffset": f, "lastOffset": la, "deliveryState": s, "deliveryCount": c}
        for f, la, s, c in batches
    ]
    return (
        f"| offset: {offset} CreateTime: {1795774842032 + offset} keySize: 49 valueSize: 40 "
        f"sequence: 0 headerKeys: [] key: {json.dumps(key)} payload: "
        f"{json.dumps({'version': '0', 'data': data})}"
    )


DUMP = [
    "Dumping /data/kafka/__share_group_state-10/00000000000000000000.log",
    "Log starting offset: 0",
    share_line(0, 0, -1, [], epoch=2),
    share_line(1, 1, 0, [(0, 13, 2, 1), (14, 14, 4, 1), (15, 16, 0, 1)]),
    share_line(2, 1, 15, [(15, 15, 2, 2), (16, 16, 0, 2)]),
    share_line(3, 1, 12, [(12, 12, 0, 1)]),  # the start offset moves back within epoch 2
]


def records() -> list[dict]:
    rows = [dict(r, node="n1", history_s=r["offset"] * 1.0) for r in parse(DUMP)]
    assert [r["segment"] for r in rows] == [DUMP[0].split()[1]] * 4
    return rows


def test_updates_fold_onto_the_snapshot_and_offsets_below_the_start_are_dropped():
    rows = [share_row(r) for r in records()]
    assert [r["kind"] for r in rows] == ["snapshot", "update", "update", "update"]
    assert state_at(rows, 1.0).start == 0
    at_two = state_at(rows, 2.0)
    assert at_two.start == 15 and at_two.ranges() == [[15, 15, 2, 2], [16, 16, 0, 2]]
    assert at_two.epoch == 2  # updates carry no state epoch: the snapshot's holds


def test_a_start_offset_moving_back_within_one_state_epoch_is_reported():
    (summary,) = share_summary(records())
    assert summary["writes"] == 4 and summary["snapshots"] == 1
    assert summary["start_offset_backwards"] == [
        {"offset": 3, "from": 15, "to": 12, "history_s": 3.0}
    ]
    assert summary["start_offset"] == 12 and summary["in_flight"][0] == [12, 12, 0, 1]


def test_a_new_snapshot_resets_the_state_and_its_epoch():
    lines = DUMP[:4] + [share_line(4, 0, 3, [(3, 5, 0, 0)], epoch=3)]
    (summary,) = share_summary([dict(r, node="n1") for r in parse(lines)])
    assert summary["start_offset_backwards"] == []
    assert summary["state_epoch"] == 3 and summary["in_flight"] == [[3, 5, 0, 0]]


def offsets_line(offset: int, partition: int, committed: int) -> str:
    key = {"type": "1", "data": {"group": "g", "topic": "t", "partition": partition}}
    value = {"version": "4", "data": {"offset": committed, "leaderEpoch": -1, "metadata": ""}}
    return (
        f"| offset: {offset} CreateTime: 1795774450637 keySize: 57 valueSize: 42 sequence: 0 "
        f"headerKeys: [] key: {json.dumps(key)} payload: {json.dumps(value)}"
    )


def test_commit_records_that_go_lower_are_listed_per_partition():
    group_line = (
        "| offset: 0 CreateTime: 1795774449365 keySize: 29 valueSize: 24 sequence: 0 "
        'headerKeys: [] key: {"type":"2","data":{"group":"g"}} payload: {"version":"3",'
        '"data":{"protocolType":"","generation":0,"members":[]}}'
    )
    tombstone = (
        "| offset: 5 CreateTime: 1 keySize: 57 valueSize: -1 sequence: 0 headerKeys: [] "
        'key: {"type":"1","data":{"group":"g","topic":"t","partition":1}} payload: <DELETE>'
    )
    lines = [group_line, offsets_line(1, 0, 40), offsets_line(2, 0, 90), offsets_line(3, 0, 60)]
    lines += [offsets_line(4, 1, 7), tombstone, "| garbled"]
    summary = commit_summary([dict(r, node="n2") for r in parse(lines)])
    assert summary == [
        {
            "group": "g", "topic": "t", "partition": 0, "commit_records": 3,
            "last_committed": 60,
            "went_lower": [{"log_offset": 3, "from": 90, "to": 60, "history_s": None}],
        },
        {
            "group": "g", "topic": "t", "partition": 1, "commit_records": 2,
            "last_committed": None, "went_lower": [],
        },
    ]  # fmt: skip


def test_the_report_section_says_what_was_persisted_and_what_went_back(tmp_path):
    from kafka_chaos.reports.coordinators import coordinators_section

    assert coordinators_section(tmp_path) is None  # a run that did not keep it
    kept = {
        "state_topic": "__share_group_state", "groups": [G], "error": None,
        "raw": ["coordinators/n1-__share_group_state.txt.gz"],
        "share_partitions": share_summary(records()),
    }  # fmt: skip
    (tmp_path / "coordinators.json").write_text(json.dumps(kept))
    section = coordinators_section(tmp_path)
    assert section["findings"] == [
        "Share-partition 10: the persisted start offset went back from 15 to 12 at 3.0 s."
    ]
    assert (
        section["share"][0]["in_flight_text"]
        == "12 available ×1, 15 acknowledged ×2, 16 available ×2"
    )
    (tmp_path / "coordinators.json").write_text(json.dumps({"error": "n2: timed out"}))
    assert "timed out" in coordinators_section(tmp_path)["missing"]


def test_share_story_sets_a_stalled_partition_beside_its_persisted_state(tmp_path):
    from kafka_chaos.share_story import story

    rows = [share_row(r) for r in records()]
    (tmp_path / "share-state.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    poll = {"group": G, "records": [{"topic": "t", "partition": 10, "offset": 15, "value": 1}]}
    kill = {"id": 0, "phase": "start", "targets": ["n2"]}
    other = {"group": G, "records": [{"topic": "t", "partition": 3, "offset": 0, "value": 2}]}
    lines = [
        {"index": i, "time": int(s * 1e9), "process": pid, "type": typ, "f": f, "value": v}
        for i, (s, pid, typ, f, v) in enumerate(
            [(0.5, 1, "ok", "share-poll", poll), (1.5, "nemesis", "info", "kill", kill),
             (20, 2, "ok", "share-poll", poll), (40, 2, "ok", "share-poll", other)]
        )
    ]  # fmt: skip
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in lines))
    told = story(tmp_path, gap_s=8)
    assert told[0] == "   1.50 s  fault kill start ['n2']"
    assert told[1].startswith("partition 3: 1 deliveries, last at 40.00 s; 0 state writes")
    told = told[2:]
    assert told[0].startswith("partition 10: 2 deliveries, last at 20.00 s; 4 state writes")
    assert told[1] == (
        "  no delivery 0.50-20.00 s; persisted then: start offset None, in flight []"
    )
    assert told[2] == (  # and a silence that never ended
        "  no delivery 20.00 s on, while other partitions delivered; "
        "persisted then: start offset 12, "
        "in flight [[12, 12, 0, 1], [15, 15, 2, 2], [16, 16, 0, 2]]"
    )


def test_share_story_keeps_two_groups_reading_one_partition_apart(tmp_path):
    """Each group has its own share-partition state: group B's silence on partition
    10 is not hidden by group A's deliveries from it, nor its state mixed with A's."""
    from kafka_chaos.share_story import story

    rows = [share_row(r) for r in records()]  # group G's writes only
    (tmp_path / "share-state.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    record = [{"topic": "t", "partition": 10, "offset": 15, "value": 1}]
    lines = [
        {"index": i, "time": int(s * 1e9), "process": 1, "type": "ok", "f": "share-poll",
         "value": {"group": g, "records": record}}
        for i, (s, g) in enumerate([(0.5, G), (0.6, "B"), (30, G)])
    ]  # fmt: skip
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in lines))
    told = story(tmp_path, gap_s=8)
    assert told[0].startswith("B partition 10: 1 deliveries, last at 0.60 s; 0 state writes")
    assert told[1] == (
        "  no delivery 0.60 s on, while other partitions delivered; "
        "persisted then: start offset None, in flight []"
    )
    assert told[2].startswith(f"{G} partition 10: 2 deliveries, last at 30.00 s; 4 state writes")
