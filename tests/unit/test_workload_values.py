"""Payload encoding, keys/partitions and the shared counters."""

from __future__ import annotations

import threading

import pytest
from _threads import run_in_threads
from hypothesis import given
from hypothesis import strategies as st
from kafka_chaos.workloads.values import (
    Counter,
    decode_key,
    decode_payload,
    encode_payload,
    key_and_partition,
    payload_template,
)


@given(st.integers(min_value=0, max_value=2**62), st.integers(min_value=0, max_value=5000))
def test_payload_round_trip_and_size(value, size):
    payload = encode_payload(value, size)
    assert decode_payload(payload) == value
    assert len(payload) == max(size, len(str(value)) + 1)
    assert payload.startswith(str(value).encode())


@pytest.mark.parametrize(
    "payload", [None, b"", b"hello", b"-5 xx", b" 12", b"12a xx", b"9" * 30, b"\xff\xfe"]
)
def test_foreign_payloads_decode_to_none(payload):
    assert decode_payload(payload) is None


def test_keys_cover_every_partition_and_map_consistently():
    partitions = 6
    seen: dict[str, int] = {}
    hit = set()
    for value in range(1000):
        key, p = key_and_partition(value, partitions)
        assert 0 <= p < partitions
        assert seen.setdefault(key, p) == p  # a key never changes partition
        hit.add(p)
    assert hit == set(range(partitions))
    assert len(seen) == 4 * partitions


def test_decode_key():
    assert decode_key(None) is None
    assert decode_key(b"17") == "17"


def test_counter_is_unique_across_threads():
    c = Counter()
    out: list[int] = []
    lock = threading.Lock()

    def take():
        got = [c.next() for _ in range(2000)]
        with lock:
            out.extend(got)

    run_in_threads(lambda _: take(), 4)
    assert sorted(out) == list(range(8000))


@given(st.integers(min_value=0, max_value=2**62), st.integers(min_value=0, max_value=300))
def test_payload_template_matches_encode_payload(value, size):
    template, bound = payload_template(value, size)
    assert bound > value
    for v in {value, (value + bound - 1) // 2, bound - 1}:
        assert template % v == encode_payload(v, size)
    assert len(b"%d" % bound) == len(b"%d" % value) + 1
