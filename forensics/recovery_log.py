"""The broker's own account of a disk fault: log-recovery and truncation lines from server.log.

Replica verification says what the replicas hold after the heal; these lines
say what each broker did on its way there.  After a power loss, for example,
a broker that finds no clean-shutdown marker recovers every segment past its
recovery point ("Recovering unflushed segment"), and the log end offset it
comes back with ("Completed load of Log(...) ... log-end-offset N") is what
reached its disk.  Pure text parsing, so it is tested on captured lines.

The texts are Kafka 4.x's (checked against apache/kafka: LogLoader.java,
UnifiedLog.java/.scala, LogManager.scala, Partition.scala,
AbstractFetcherThread.scala, ReplicationControlManager.java); a line that no
pattern knows is ignored, never guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from kafka_chaos.forensics.log_dump import _log_time_ms

# kind -> pattern; each pattern may name ``tp`` (topic-partition), ``offset`` and ``segment``.
# Order matters only in that the first pattern that matches a line names its kind.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # LogLoader: the broker found no clean shutdown and re-reads what was past its recovery point.
    (
        "recovering-unflushed",
        re.compile(
            r"Recovering unflushed segment (?P<segment>\d+)\. .* recovered for (?P<tp>\S+)\."
        ),
    ),
    # LogLoader: a batch failed its CRC or its offsets; the segment is cut there.
    (
        "corruption",
        re.compile(
            r"partition=(?P<tp>[^,\]]+).*Corruption found in segment (?P<segment>\d+), "
            r"truncating to offset (?P<offset>\d+)"
        ),
    ),
    (
        "corruption",
        re.compile(r"Found invalid messages in log segment (?P<path>\S+/(?P<tp>[^/\s]+)/\d+\.log)"),
    ),
    (
        "corruption",
        re.compile(r"partition=(?P<tp>[^,\]]+).*Found invalid offset during recovery"),
    ),
    # LogManager: what the log came back with after loading (and recovering) it.
    (
        "loaded",
        re.compile(
            r"Completed load of Log\(dir=\S+/(?P<tp>[^/,]+), .*log-end-offset (?P<offset>\d+)"
        ),
    ),
    (
        "producer-state",
        re.compile(
            r"partition=(?P<tp>[^,\]]+).*Loading producer state till offset (?P<offset>\d+)"
        ),
    ),
    (
        "initial-high-watermark",
        re.compile(
            r"Log loaded for partition (?P<tp>\S+) with initial high watermark (?P<offset>\d+)"
        ),
    ),
    (
        "no-high-watermark",
        re.compile(r"No checkpointed highwatermark is found for partition (?P<tp>\S+)"),
    ),
    (
        "deleted-segments",
        re.compile(
            r"partition=(?P<tp>[^,\]]+).*Deleting segments as part of log (?:recovery|truncation)"
        ),
    ),
    # UnifiedLog and the fetcher: a follower cuts its log back to what its leader holds.
    (
        "truncation",
        re.compile(r"partition=(?P<tp>[^,\]]+).*\] Truncating to offset (?P<offset>\d+)"),
    ),
    (
        "truncation",
        re.compile(
            r"Truncating partition (?P<tp>\S+) with TruncationState\(offset=(?P<offset>\d+)"
        ),
    ),
    # The controller: every replica of a partition came back unclean (KIP-966's
    # eligible leader replicas gone), so it elects one with no ISR to back it.
    (
        "unclean-election",
        re.compile(r"UNCLEAN partition change for (?P<tp>\S+) with topic ID"),
    ),
    # A log directory that failed (disk full, I/O errors): the broker stops serving it.
    (
        "log-dir-offline",
        re.compile(r"Stopping serving logs in dir (?P<path>\S+)"),
    ),
)

# Kafka's "Truncating to N has no effect" lines say nothing happened; they are not kept.
_NO_EFFECT = "has no effect"
MAX_LINE = 400


@dataclass(frozen=True)
class RecoveryLine:
    """One line of a broker's account: what kind, of which partition, at what offset."""

    kind: str
    partition: int | None  # None for lines about a directory, not a partition
    offset: int | None
    segment: int | None
    time_ms: int | None
    line: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def recovery_lines(lines: Iterable[str], topic: str) -> Iterator[RecoveryLine]:
    """The recovery and truncation lines of ``topic``'s partitions (and failed log dirs)."""
    prefix = topic + "-"
    for line in lines:
        if _NO_EFFECT in line:
            continue
        if prefix not in line and "Stopping serving logs" not in line:
            continue
        for kind, pattern in PATTERNS:
            m = pattern.search(line)
            if m is None:
                continue
            found = m.groupdict()
            partition = _partition(found.get("tp"), topic)
            if found.get("tp") is not None and partition is None:
                break  # another topic that shares the prefix
            yield RecoveryLine(
                kind=kind,
                partition=partition,
                offset=_int(found.get("offset")),
                segment=_int(found.get("segment")),
                time_ms=_log_time_ms(line),
                line=line.strip()[:MAX_LINE],
            )
            break


def _partition(tp: str | None, topic: str) -> int | None:
    if tp is None:
        return None
    name, _, number = tp.rpartition("-")
    return int(number) if name == topic and number.isdigit() else None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None else None
