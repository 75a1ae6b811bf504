"""Which offsets in librdkafka's delivery reports say where a record is.

When a broker answers an idempotent batch DUPLICATE_SEQUENCE_NUMBER, librdkafka
marks the whole batch delivered ("Treat as success, however offset and timestamp
will be invalid", ``src/rdkafka_request.c``), yet still numbers its messages from
the answer's base offset, -1: ``rkm_offset = base_offset++`` (``src/rdkafka_msg.c``).
So the batch's first report carries -1 (confluent-kafka gives ``None``) and its
batch-mates 0, 1, 2, ...  Those small offsets name records that are elsewhere,
or nowhere (Tansu 0.6.0 answers DUPLICATE to a batch it never stored:
evidence/tansu-storage-partition-0.6.0/).  Recorded as positions, they made the
checks report offsets the log never gave the value.

A batch's reports arrive back to back for its partition, so after a report
without an offset the reports of that partition counting up from 0 are its
batch-mates; the first report that breaks the count is a batch of its own.
"""

from __future__ import annotations


class DuplicateBatchOffsets:
    """One producer's delivery reports, partition by partition: the offset to record."""

    def __init__(self) -> None:
        # (topic, partition) -> the offset its next batch-mate would carry; empty in
        # the common case, so the producer's hot path asks only ``if offsets.waiting``.
        self.waiting: dict[tuple[str, int], int] = {}

    def position(self, topic: str, partition: int, offset: int | None) -> int | None:
        """``offset`` when it says where the record is; ``None`` when it does not:
        no offset, or a batch-mate of a report without one (-1, 0, 1, ... in a row)."""
        key = (topic, partition)
        if offset is None or offset < 0:
            self.waiting[key] = 0
            return None
        expected = self.waiting.pop(key, None)
        if expected is not None and offset == expected:
            self.waiting[key] = offset + 1
            return None
        return offset
