"""Damage only reading finds: a batch failing its CRC in DumpLogSegments' output, a
dump that died in a segment, and how replica verification and the report say so.

The batch line is a real one of Kafka 4.4.0's DumpLogSegments (pl48b's
corrupt-segment run, 2026-11-28) with its ``isvalid`` turned false, as the
tool prints it for a batch whose CRC does not match.
"""

from __future__ import annotations

from kafka_chaos.forensics.log_dump import InvalidBatch, last_dumped, parse_dump
from kafka_chaos.forensics.replica_verify import summary
from kafka_chaos.forensics.segment_dump import exception_line
from kafka_chaos.reports.replicas import damage_sentences

SEG = "/d/n1/data/kafka/chaos-8/00000000000000000000.log"
BATCH = (
    "baseOffset: 0 lastOffset: 21 count: 22 baseSequence: 0 lastSequence: 21 producerId: 2000 "
    "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
    "deleteHorizonMs: OptionalLong.empty position: 2510 CreateTime: 1795873020819 size: 2510 "
    "magic: 2 compresscodec: none crc: 308070628 isvalid: {}"
)
RECORD = (
    "| offset: {0} CreateTime: 1 keySize: 1 valueSize: 3 sequence: 0 headerKeys: [] key: 0 "
    "payload: {0}"
)


def _dump(valid: str) -> list[str]:
    return [f"Dumping {SEG}", "Log starting offset: 0", BATCH.format(valid), RECORD.format(0)]


def test_a_batch_failing_its_crc_is_kept_with_its_segment_and_position() -> None:
    [log] = parse_dump(_dump("false")).values()
    assert log.invalid == [InvalidBatch(SEG, 0, 21, 2510)]
    assert log.records == {0: "0"}  # its records are still read
    [log] = parse_dump(_dump("true")).values()
    assert log.invalid == []


def test_where_a_dump_stopped_is_the_last_segment_it_began() -> None:
    other = "/d/n1/data/kafka/chaos-9/00000000000000000000.log"
    assert last_dumped([*_dump("true"), f"Dumping {other}", "Log starting offset: 0"]) == other
    assert last_dumped(["Exception in thread main"]) is None


def test_the_exception_a_tool_died_with() -> None:
    stderr = (
        'Exception in thread "main" org.apache.kafka.common.errors.CorruptRecordException: '
        "Record size 0 is less than the minimum record overhead (14)\n\tat org.apache.kafka...\n"
    )
    assert exception_line(stderr).startswith('Exception in thread "main" org.apache.kafka')
    assert exception_line("") == "no output on stderr"
    assert exception_line("just this\n") == "just this"


def test_replica_verification_and_the_report_say_what_reading_found() -> None:
    result = {
        "partitions": [],
        "corruptions": [],
        "invalid_batches": [{"node": "n1", "partition": 8, "segment": SEG, "base_offset": 0,
                             "last_offset": 21, "position": 2510}],
        "unreadable": [{"node": "n3", "partition": 2, "segment": SEG,
                        "error": "java.nio.BufferUnderflowException"}],
    }  # fmt: skip
    said = summary(result)
    assert "n1's partition 8 holds a batch that fails its CRC (offsets 0-21, 0000" in said
    assert "n3's partition 2 cannot be read past a damaged batch (0000" in said
    sentences = damage_sentences(result)
    assert sentences[0].startswith("n1's copy of partition 8 holds a batch that fails its CRC")
    assert "java.nio.BufferUnderflowException" in sentences[1]


def test_a_segment_cut_short_is_an_invalid_tail_and_said_so() -> None:
    """The real lines of a closed segment whose last 8 bytes were cut (Kafka 4.4.0, 2026-11-28):
    the tool skips the broken batch and says how many bytes it could not read."""
    lines = [
        f"Dumping {SEG}",
        "Log starting offset: 0",
        "Found 997747 invalid bytes at the end of 00000000000000000000.log",
    ]
    [log] = parse_dump(lines).values()
    assert log.invalid == [InvalidBatch(SEG, None, None, None, 997747)]
    assert log.records == {}
    tail = {"node": "n3", "partition": 0, "segment": SEG, "base_offset": None,
            "last_offset": None, "position": None, "invalid_bytes": 997747}  # fmt: skip
    said = summary({"partitions": [], "invalid_batches": [tail]})
    assert said.endswith(
        "n3's partition 0 ends a segment with 997747 bytes that hold no whole batch "
        "(00000000000000000000.log): the offsets in them cannot be read"
    )
    [sentence] = damage_sentences({"invalid_batches": [tail]})
    assert "with 997747 bytes that hold no whole batch" in sentence
