"""Unique values, keys and payloads shared by every queue worker.

A value is unique across the whole test so a checker can follow one message
from its send to every poll that saw it.  The payload starts with the value
in decimal so a consumer can recover it from the bytes alone; the rest is
padding up to the configured message size.
"""

from __future__ import annotations

import threading

KEYS_PER_PARTITION = 4  # several keys per partition, so per-key order is checkable
_PAD = b"x"


class Counter:
    """A thread-safe counter: values and process numbers come from these."""

    def __init__(self, start: int = 0) -> None:
        self._next = start
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            value = self._next
            self._next += 1
            return value

    def take(self, n: int) -> range:
        """``n`` consecutive values at once: one lock round per send burst, not per send."""
        with self._lock:
            first = self._next
            self._next += n
            return range(first, first + n)


def encode_payload(value: int, size: int) -> bytes:
    """``b"<value> xxx..."`` padded to ``size`` bytes (never shorter than the number)."""
    head = b"%d " % value
    return head + _PAD * max(0, size - len(head))


def payload_template(value: int, size: int) -> tuple[bytes, int]:
    """A ``%d`` template of ``encode_payload`` for values as long as ``value``, and their bound.

    ``template % v == encode_payload(v, size)`` for ``value <= v < bound``: one
    formatting operation per payload instead of three (the producer's hot path).
    """
    digits = len(b"%d" % value)
    return b"%d " + _PAD * max(0, size - digits - 1), 10**digits


def decode_payload(payload: bytes | None) -> int | None:
    """The value a payload starts with, or None if it is not one of ours."""
    if not payload:
        return None
    head = payload.split(b" ", 1)[0]
    if not head.isdigit() or len(head) > 19:
        return None
    return int(head)


def key_and_partition(value: int, partitions: int) -> tuple[str, int]:
    """Spread values over every partition; a key always maps to the same partition.

    The partition is chosen explicitly (not by hashing the key) so that the
    spread is exact and the recorded key is what was sent.
    """
    k = value % (partitions * KEYS_PER_PARTITION)
    return str(k), k % partitions


def decode_key(key: bytes | None) -> str | None:
    return None if key is None else key.decode("utf-8", errors="replace")
