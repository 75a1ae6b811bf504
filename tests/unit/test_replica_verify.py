"""Replica verification's pure parts: reading DumpLogSegments output and broker log
lines (formats as Kafka 3.9 and 4.4 print them), and comparing copies of a log."""

from __future__ import annotations

from datetime import UTC, datetime

from kafka_chaos.forensics.log_dump import (
    ReplicaLog,
    merge_truncations,
    parse_checkpoint,
    parse_dump,
    record_value,
    truncations,
)
from kafka_chaos.forensics.replica_compare import (
    compare_before_rejoin,
    compare_follower,
    compare_live,
    ranges,
    stored_twice,
)
from kafka_chaos.forensics.replica_verify import summary

TOPIC = "chaos-20261125t042811z"
BATCH = (
    "baseOffset: {o} lastOffset: {o} count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
    "producerEpoch: -1 partitionLeaderEpoch: {epoch} isTransactional: false isControl: false "
    "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1795581105548 size: 391 "
    "magic: 2 compresscodec: none crc: 4294251447 isvalid: true"
)
RECORD = (
    "| offset: {o} CreateTime: 1795581105524 keySize: 1 valueSize: 100 sequence: -1 "
    "headerKeys: [] key: 3 payload: {v} xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
)
MARKER = (
    "| offset: {o} CreateTime: 1795581105524 keySize: 4 valueSize: 6 sequence: -1 "
    "headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0"
)


def dump(segments: dict[str, dict[int, int]], epoch: int = 0) -> list[str]:
    """DumpLogSegments --print-data-log output for {segment path: {offset: value}}."""
    lines = []
    for path, records in segments.items():
        lines += [f"Dumping {path}", f"Log starting offset: {min(records, default=0)}"]
        for o, v in sorted(records.items()):
            lines += [BATCH.format(o=o, epoch=epoch), RECORD.format(o=o, v=v)]
    return lines


def log_of(records: dict[int, int]) -> ReplicaLog:
    return ReplicaLog("d", {o: str(v) for o, v in records.items()})


def test_a_dump_of_several_partitions_and_copies_is_split_by_directory() -> None:
    live = f"/n1/data/kafka/{TOPIC}-0"
    copy = f"/n1/run/before-rejoin/fault-3/{TOPIC}-0"
    lines = dump(
        {
            f"{live}/00000000000000000000.log": {0: 3, 1: 9},
            f"{live}/00000000000000000002.log": {2: 15},
            f"{copy}/00000000000000000000.log": {0: 3, 1: 9, 2: 77},
        }
    )
    logs = parse_dump(lines)
    assert logs[live].records == {0: "3", 1: "9", 2: "15"}
    assert logs[copy].records == {0: "3", 1: "9", 2: "77"}
    assert (logs[live].log_start, logs[live].log_end) == (0, 3)


def test_transaction_markers_keep_their_offsets() -> None:
    assert record_value(MARKER.format(o=7)) == "marker:COMMIT"
    assert record_value(RECORD.format(o=7, v=42)) == "42"
    logs = parse_dump(["Dumping /d/t-0/0.log", MARKER.format(o=7), RECORD.format(o=8, v=1)])
    assert logs["/d/t-0"].records == {7: "marker:COMMIT", 8: "1"}


def test_followers_that_agree_below_the_high_watermark_agree() -> None:
    leader = log_of({o: o for o in range(10)})
    follower = log_of({o: o for o in range(8)})  # still fetching above the watermark
    assert compare_live(follower, leader, high_watermark=8).agree is True


def test_a_follower_differing_below_the_high_watermark_says_where_and_what() -> None:
    leader = log_of({o: o for o in range(10)})
    follower = log_of({**{o: o for o in range(10)}, 4: 99, 5: 98, 8: 97})
    got = compare_live(follower, leader, high_watermark=10)
    assert got.agree is False
    assert got.first_divergence == {"offset": 4, "here": "99", "leader": "4"}
    assert got.diverged_offsets == 3 and got.diverged_ranges == [[4, 5], [8, 8]]


def test_a_follower_missing_records_below_the_watermark_disagrees() -> None:
    leader = log_of({o: o for o in range(6)})
    got = compare_live(log_of({0: 0, 1: 1}), leader, high_watermark=6)
    assert got.agree is False and got.diverged_ranges == [[2, 5]]
    assert got.first_divergence == {"offset": 2, "here": None, "leader": "2"}


def test_a_follower_outside_the_isr_is_compared_below_its_own_log_end() -> None:
    """Replication timed out before it caught up: its missing tail is lag, and even a
    different value is undecided (Kafka promises agreement only of in-sync replicas)."""
    leader = log_of({o: o for o in range(10)})
    behind = compare_follower(log_of({o: o for o in range(6)}), leader, 10, in_isr=False)
    assert behind["agree"] is True and behind["lagging_offsets"] == 4
    stale = compare_follower(log_of({0: 0, 1: 1, 2: 77}), leader, 10, in_isr=False)
    assert stale["agree"] is None and stale["unreconciled"] and stale["lagging_offsets"] == 7
    assert stale["first_divergence"] == {"offset": 2, "here": "77", "leader": "2"}
    in_sync = compare_follower(log_of({o: o for o in range(6)}), leader, 10, in_isr=True)
    assert in_sync["agree"] is False and in_sync["diverged_ranges"] == [[6, 9]]


def test_a_deposed_leaders_copy_shows_the_truncated_tail_and_what_is_gone() -> None:
    """The unclean election: the old leader acknowledged 100..105 at offsets 4..9 alone;
    the new leader wrote 200..207 there; one of the old values (103) was re-sent and lives on."""
    old = log_of({**{o: o for o in range(4)}, **{4 + i: 100 + i for i in range(6)}})
    new = log_of({**{o: o for o in range(4)}, **{4 + i: 200 + i for i in range(8)}})
    got = compare_before_rejoin(old, new, held_now={*map(str, range(4)), "103"}, committed=10)
    assert got.agree is False
    assert got.first_divergence == {"offset": 4, "here": "100", "leader": "200"}
    assert got.diverged_ranges == [[4, 9]] and got.diverged_offsets == 6
    assert got.lost_values == 5


def test_a_copy_identical_to_the_leaders_prefix_agrees() -> None:
    new = log_of({o: o for o in range(12)})
    got = compare_before_rejoin(log_of({o: o for o in range(7)}), new, set(), committed=5)
    assert got.agree is True and got.lost_values == 0 and got.first_divergence is None


def test_a_copys_different_tail_above_its_high_watermark_is_not_divergence() -> None:
    """Kafka truncates a leader's uncommitted tail by design: never acknowledged with acks=all."""
    old = log_of({0: 0, 1: 1, 2: 2, 3: 50, 4: 51})
    new = log_of({0: 0, 1: 1, 2: 2, 3: 60})
    got = compare_before_rejoin(old, new, held_now=set(), committed=3)
    assert got.agree is True and got.uncommitted_offsets == 2 and got.lost_values == 0


def test_a_copys_tail_beyond_the_leaders_log_end_counts_as_diverged() -> None:
    old, new = log_of({0: 0, 1: 1, 2: 2}), log_of({0: 0})
    got = compare_before_rejoin(old, new, held_now={"0"}, committed=None)
    assert got.diverged_ranges == [[1, 2]] and got.lost_values == 2
    assert got.first_divergence == {"offset": 1, "here": "1", "leader": None}


def test_the_checkpointed_high_watermarks_of_the_topic() -> None:
    text = f"0\n3\n{TOPIC} 0 4091\n{TOPIC} 2 17\n__consumer_offsets 0 5\n"
    assert parse_checkpoint(text, TOPIC) == {0: 4091, 2: 17}
    assert parse_checkpoint("", TOPIC) == {}


def test_ranges_are_runs_of_consecutive_offsets() -> None:
    assert ranges([5, 1, 2, 3, 9, 10]) == [[1, 3], [5, 5], [9, 10]]
    assert ranges([]) == []


# Lines as a 4.4.0 broker wrote them during the unclean-election scenario.
SERVER_LOG = [
    f"[2026-11-25 04:28:18,466] INFO [ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] "
    f"Truncating partition {TOPIC}-2 with TruncationState(offset=0, completed=true) due to "
    "local high watermark 0 (kafka.server.ReplicaFetcherThread)",
    f"[2026-11-25 04:28:18,466] INFO [UnifiedLog partition={TOPIC}-2, dir=/x/data/kafka] "
    "Truncating to 0 has no effect as the largest offset in the log is -1 (UnifiedLog)",
    f"[2026-11-25 04:29:07,225] INFO [ReplicaFetcher replicaId=2, leaderId=3, fetcherId=0] "
    f"Truncating partition {TOPIC}-0 with TruncationState(offset=980, completed=true) due to "
    "leader epoch and offset EpochEndOffset(errorCode=0, partition=0, leaderEpoch=0, "
    "endOffset=980) (kafka.server.ReplicaFetcherThread)",
    f"[2026-11-25 04:29:07,225] INFO [UnifiedLog partition={TOPIC}-0, dir=/x/data/kafka] "
    "Truncating to offset 980 (org.apache.kafka.storage.internals.log.UnifiedLog)",
    f"[2026-11-25 04:29:07,226] WARN [UnifiedLog partition={TOPIC}-0, dir=/x/data/kafka] "
    f"Truncating {TOPIC}-0 to offset 980 below high watermark 4091 (UnifiedLog)",
    f"[2026-11-25 04:29:08,000] WARN Truncating {TOPIC}-10 to offset 5 below high watermark 7",
    f"[2026-11-25 04:29:08,000] WARN Truncating other-{TOPIC}-1 to offset 5 below high watermark 7",
]


def test_truncations_are_read_from_the_broker_log_one_per_event() -> None:
    found = merge_truncations(truncations(SERVER_LOG, TOPIC))
    assert [(t.partition, t.offset, t.high_watermark) for t in found] == [
        (0, 980, 4091),
        (10, 5, 7),
    ]
    first = found[0]
    expected = datetime(2026, 11, 25, 4, 29, 7, 225000, tzinfo=UTC).timestamp() * 1000
    assert first.time_ms == int(expected)  # the earliest line of the event
    assert "below high watermark 4091" in first.line


def test_the_one_line_summary_says_where_replicas_differ_in_words() -> None:
    copy = {
        "node": "n2",
        "source": "before-rejoin",
        "agree": False,
        "diverged_ranges": [[980, 4090], [4095, 4095]],
        "lost_values": 3100,
    }
    live = {"node": "n1", "source": "live", "agree": True}
    result = {"partitions": [{"partition": 0, "agree": True, "compared": [live, copy]}]}
    assert summary(result) == (
        "replicas: partition 0: n2's log before it rejoined differs from the leader's "
        "at offsets 980-4090, 4095 (3100 values now on no replica)"
    )
    agreed = {"partitions": [{"partition": p, "agree": True, "compared": [live]} for p in (0, 1)]}
    assert summary(agreed) == "replicas: all 2 partitions agree below the high watermark"
    assert summary({"error": "cannot describe topic t"}) == (
        "replicas: not verified: cannot describe topic t"
    )


def test_each_offset_is_traced_to_the_producer_epoch_that_wrote_it() -> None:
    """A value stored twice by one producer id, the second time under a bumped
    epoch (as a 4.4.0 broker printed it on a VM run): the dump says so."""
    head = (
        "baseOffset: {b} lastOffset: {e} count: {n} baseSequence: 0 lastSequence: {s} "
        "producerId: 1001 producerEpoch: {epoch} partitionLeaderEpoch: 0 isTransactional: false "
        "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1 size: 9 "
        "magic: 2 compresscodec: none crc: 1 isvalid: true"
    )
    path = f"/d/{TOPIC}-4/00000000000000000000.log"
    lines = [f"Dumping {path}", "Log starting offset: 0"]
    lines += [head.format(b=87, e=614, n=528, s=527, epoch=0), RECORD.format(o=289, v=5392)]
    lines += [head.format(b=7738, e=10236, n=2499, s=2498, epoch=26), RECORD.format(o=7738, v=5392)]
    log = parse_dump(lines)[f"/d/{TOPIC}-4"]
    assert log.records == {289: "5392", 7738: "5392"}
    first, again = log.batch_at(289), log.batch_at(7738)
    assert first and again and first.producer_id == again.producer_id == 1001
    assert (first.producer_epoch, again.producer_epoch) == (0, 26)
    assert log.batch_at(7000) is None
    # Non-transactional batches from an older client carry no producer (-1).
    plain = parse_dump(dump({path: {0: 1}}))[f"/d/{TOPIC}-4"]
    assert plain.batch_at(0).producer_id == -1


def test_values_stored_twice_are_counted_with_the_writer_of_each_copy() -> None:
    head = (
        "baseOffset: {b} lastOffset: {e} count: 1 baseSequence: 0 lastSequence: 0 "
        "producerId: {pid} producerEpoch: {epoch} partitionLeaderEpoch: 0 isTransactional: false"
    )
    lines = [f"Dumping /d/{TOPIC}-0/00000000000000000000.log"]
    for base, last, pid, epoch, values in [
        (0, 1, 7, 0, [10, 11]),
        (2, 3, 7, 3, [10, 12]),  # 10 again: producer 7, bumped epoch
        (4, 4, 9, 0, [11]),  # 11 again: another producer (not a bump)
        (5, 5, 7, 4, [13]),
        (6, 6, 7, 5, [13]),  # 13 again, but above the high watermark: not counted
    ]:
        lines.append(head.format(b=base, e=last, pid=pid, epoch=epoch))
        lines += [RECORD.format(o=base + i, v=v) for i, v in enumerate(values)]
    leader = parse_dump(lines)[f"/d/{TOPIC}-0"]
    twice = stored_twice(leader, high_watermark=6)
    assert twice is not None and (twice["values"], twice["epoch_bump"]) == (2, 1)
    assert twice["examples"][0] == {
        "value": "10", "offsets": [0, 2], "producer_ids": [7, 7],
        "producer_epochs": [0, 3], "epoch_bump": True,
    }  # fmt: skip
    assert twice["examples"][1]["epoch_bump"] is False
    assert stored_twice(leader, high_watermark=2) is None
    part = {"partition": 0, "agree": True, "compared": [], "stored_twice": twice}
    assert summary({"partitions": [part]}) == (
        "replicas: all 1 partitions agree below the high watermark; partition 0: 2 values "
        "stored twice, 1 of them sent again by their producer under a bumped epoch"
    )
