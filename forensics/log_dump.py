"""Read what brokers hold on disk: DumpLogSegments output, truncation and corruption log lines.

Pure text parsing, so replica verification can be tested without a cluster.
The dump covers several partitions and copies at once; each file's records
are keyed by the directory the segment lives in (``<topic>-<partition>``).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

_DUMPING = re.compile(r"^Dumping (?P<path>\S+)")
_RECORD = re.compile(r"^\| offset: (?P<offset>\d+) ")
_BATCH = re.compile(
    r"^baseOffset: (?P<base>\d+) lastOffset: (?P<last>\d+) .*"
    r"producerId: (?P<pid>-?\d+) producerEpoch: (?P<epoch>-?\d+) "
)
# DumpLogSegments checks each batch's CRC ("isvalid"); a batch damaged on disk
# below the recovery point is never re-checked by the broker, only here.
_POSITION = re.compile(r" position: (?P<pos>\d+) ")
# ... and a segment whose tail holds no whole batch (cut short): Kafka reads past it
# to the next segment, so the offsets in it vanish from this replica without an error.
_INVALID_TAIL = re.compile(r"^Found (?P<n>\d+) invalid bytes at the end of ")
_PAYLOAD = re.compile(r" payload: (?P<payload>\S*)")
_MARKER = re.compile(r" endTxnMarker: (?P<marker>\w+)")
_TIME = re.compile(r"^\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
_OFFSET = re.compile(r"(?:offset=|to offset |Truncating to )(?P<offset>\d+)")
_BELOW_HW = re.compile(r"below high watermark (?P<hw>\d+)")
# Kafka 4.x's recovery of a segment it finds damaged: LogSegment.recover (a batch
# failed its CRC or its checks) and LogLoader.recoverLog (the segment is cut there).
_CORRUPT = re.compile(
    r"Found invalid messages in log segment (?P<path>\S+?)\.? at byte offset (?P<byte>\d+)"
    r"|Corruption found in segment (?P<base>\d+), truncating to offset (?P<offset>\d+)"
)
CORRUPTION_NEEDLES = ("Found invalid messages in log segment", "Corruption found in segment")


@dataclass(frozen=True)
class Batch:
    """A record batch's offsets and the producer (id, epoch) that wrote it.

    Tells why a value sits twice in one log: the same producer id with a
    higher epoch is a client that bumped its epoch and sent the batch again,
    which the broker cannot recognise as a retry.
    """

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class InvalidBatch:
    """A batch DumpLogSegments read with a CRC that does not match its bytes, or
    (``invalid_bytes``, no offsets) a segment's tail that holds no whole batch."""

    segment: str  # the segment file
    base_offset: int | None
    last_offset: int | None
    position: int | None  # its byte position in the segment
    invalid_bytes: int | None = None


@dataclass
class ReplicaLog:
    """One copy of one partition's log: offset -> the value stored there."""

    directory: str  # the segment files' directory on the node
    records: dict[int, str] = field(default_factory=dict)
    batches: list[Batch] = field(default_factory=list)
    invalid: list[InvalidBatch] = field(default_factory=list)
    _by_base: list[Batch] = field(default_factory=list, repr=False, compare=False)

    def batch_at(self, offset: int) -> Batch | None:
        """The batch holding ``offset``, if this copy has it."""
        if len(self._by_base) != len(self.batches):
            self._by_base = sorted(self.batches, key=lambda b: b.base_offset)
        i = bisect.bisect_right(self._by_base, offset, key=lambda b: b.base_offset) - 1
        found = self._by_base[i] if i >= 0 else None
        return found if found is not None and offset <= found.last_offset else None

    @property
    def log_start(self) -> int | None:
        return min(self.records) if self.records else None

    @property
    def log_end(self) -> int | None:
        """One past the last offset held (Kafka's log end offset)."""
        return max(self.records) + 1 if self.records else None


def record_value(line: str) -> str | None:
    """The workload's value of a dump record line: the payload's leading token.

    Payloads are ``<value> <padding>`` (workloads.values); a transaction
    marker has no payload and is kept as ``marker:COMMIT``/``marker:ABORT``
    so its offset still compares.
    """
    payload = _PAYLOAD.search(line)
    if payload:
        return payload.group("payload")
    marker = _MARKER.search(line)
    return f"marker:{marker.group('marker')}" if marker else None


def parse_dump(lines: Iterable[str]) -> dict[str, ReplicaLog]:
    """Records and batches per segment directory, from ``DumpLogSegments --print-data-log``."""
    logs: dict[str, ReplicaLog] = {}
    current: ReplicaLog | None = None
    segment = ""
    for line in lines:
        if line.startswith("Dumping "):
            path = _DUMPING.match(line)
            segment = path.group("path") if path else ""
            directory = segment.rsplit("/", 1)[0]
            current = logs.setdefault(directory, ReplicaLog(directory))
            continue
        if current is None:
            continue
        tail = _INVALID_TAIL.match(line)
        if tail:
            current.invalid.append(InvalidBatch(segment, None, None, None, int(tail["n"])))
            continue
        if line.startswith("baseOffset: "):
            b = _BATCH.match(line)
            if b:
                current.batches.append(
                    Batch(int(b["base"]), int(b["last"]), int(b["pid"]), int(b["epoch"]))
                )
                if "isvalid: false" in line:
                    pos = _POSITION.search(line)
                    current.invalid.append(
                        InvalidBatch(segment, int(b["base"]), int(b["last"]),
                                     int(pos["pos"]) if pos else None)
                    )  # fmt: skip
            continue
        if not line.startswith("| offset: "):
            continue
        m = _RECORD.match(line)
        value = record_value(line)
        if m and value is not None:
            current.records[int(m.group("offset"))] = value
    return logs


def last_dumped(lines: Iterable[str]) -> str | None:
    """The segment file whose dump began last: where a dump that died stopped."""
    last = None
    for line in lines:
        if line.startswith("Dumping "):
            m = _DUMPING.match(line)
            last = m.group("path") if m else last
    return last


def parse_checkpoint(text: str, topic: str) -> dict[int, int]:
    """High watermarks of ``topic``'s partitions from a replication-offset-checkpoint file.

    The file is ``version``, ``count``, then ``topic partition offset`` lines;
    a broker rewrites it every few seconds, so it may trail the watermark
    the broker last knew, never lead it.
    """
    out: dict[int, int] = {}
    for line in text.splitlines()[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and parts[1].isdigit():
            out[int(parts[1])] = int(parts[2])
    return out


@dataclass(frozen=True)
class Truncation:
    partition: int
    offset: int
    high_watermark: int | None
    time_ms: int | None
    line: str


def truncations(lines: Iterable[str], topic: str) -> Iterator[Truncation]:
    """Log truncations of ``topic``'s partitions, from a broker's server.log.

    A broker says so in several lines per event (the fetcher's reason, then
    the log's "Truncating to offset N"); each is yielded and the caller
    merges them per (partition, offset).  Truncating an empty log to 0 at
    start-up is noise and skipped.
    """
    partition_re = re.compile(rf"(?<![\w.-]){re.escape(topic)}-(?P<partition>\d+)\b")
    for line in lines:
        if "Truncat" not in line:
            continue
        part = partition_re.search(line)
        offset = _OFFSET.search(line)
        if not part or not offset:
            continue
        hw = _BELOW_HW.search(line)
        if int(offset.group("offset")) == 0 and not hw:
            continue
        yield Truncation(
            partition=int(part.group("partition")),
            offset=int(offset.group("offset")),
            high_watermark=int(hw.group("hw")) if hw else None,
            time_ms=_log_time_ms(line),
            line=line.strip()[:500],
        )


@dataclass(frozen=True)
class Corruption:
    """A damaged segment a broker found on start, and where it cut it."""

    partition: int
    kind: str  # "invalid-batch": a batch failed its CRC; "truncated": the segment was cut
    byte_offset: int | None  # invalid-batch: where in the segment file
    offset: int | None  # truncated: the log offset it was cut to
    time_ms: int | None
    line: str


def corruptions(lines: Iterable[str], topic: str) -> Iterator[Corruption]:
    """Damaged segments of ``topic`` a broker's server.log says it found and cut back."""
    partition_re = re.compile(rf"(?<![\w.-]){re.escape(topic)}-(?P<partition>\d+)\b")
    for line in lines:
        found = _CORRUPT.search(line)
        part = partition_re.search(line)
        if not found or not part:
            continue
        invalid = found.group("byte") is not None
        yield Corruption(
            partition=int(part.group("partition")),
            kind="invalid-batch" if invalid else "truncated",
            byte_offset=int(found.group("byte")) if invalid else None,
            offset=None if invalid else int(found.group("offset")),
            time_ms=_log_time_ms(line),
            line=line.strip()[:500],
        )


def merge_truncations(found: Iterable[Truncation]) -> list[Truncation]:
    """One truncation per (partition, offset): the earliest line, with any high watermark."""
    merged: dict[tuple[int, int], Truncation] = {}
    for t in found:
        key = (t.partition, t.offset)
        first = merged.get(key)
        if first is None:
            merged[key] = t
        elif first.high_watermark is None and t.high_watermark is not None:
            merged[key] = Truncation(t.partition, t.offset, t.high_watermark, first.time_ms, t.line)
    return sorted(merged.values(), key=lambda t: (t.time_ms or 0, t.partition, t.offset))


def _log_time_ms(line: str) -> int | None:
    """log4j's ``[yyyy-mm-dd hh:mm:ss,mmm]`` as epoch ms: brokers log in UTC
    (``kafka_config.jvm_flags``), so the harness's own time zone plays no part."""
    m = _TIME.match(line)
    if not m:
        return None
    stamp = datetime.strptime(m.group("time"), "%Y-%m-%d %H:%M:%S,%f")
    return int(stamp.replace(tzinfo=UTC).timestamp() * 1000)
