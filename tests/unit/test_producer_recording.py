"""How a producer worker records its sends, against a fake librdkafka producer.

The fake checks the durability rules of docs/history.md while the worker
runs: a send's invoke is on disk before ``produce()`` sees the message, and
every completion a ``poll()`` delivered is on disk before the next blocking
call.  The pre-encoded send lines must be byte-identical to the general
encoder's.
"""

from __future__ import annotations

import collections
import threading
from pathlib import Path
from typing import Any

import kafka_chaos.workloads.producer as producer_module
import orjson
import pytest
from _threads import run_in_threads
from confluent_kafka import KafkaError
from kafka_chaos.harness.history import HistoryWriter, encode_tail, read_history
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.workloads.producer import Pacer, ProducerWorker
from kafka_chaos.workloads.send_lines import SendLines
from kafka_chaos.workloads.values import Counter, decode_payload


class FakeMsg:
    def __init__(self, topic: str, value: bytes, key: bytes, partition: int, offset: int) -> None:
        self._fields = (topic, value, key, partition, offset)

    def topic(self) -> str:
        return self._fields[0]

    def value(self) -> bytes:
        return self._fields[1]

    def key(self) -> bytes:
        return self._fields[2]

    def partition(self) -> int:
        return self._fields[3]

    def offset(self) -> int:
        return self._fields[4]


class FakeProducer:
    """Delivers everything queued at each poll(); value % 7 == 3 times out, % 11 == 5 overflows.

    Stops the run (``stop``) once ``limit`` messages were produced.
    """

    path: Path
    stop: threading.Event
    limit: int

    def __init__(self, conf: dict[str, Any]) -> None:
        self.on_delivery = conf["on_delivery"]
        self.queue: list[FakeMsg] = []
        self.offsets: collections.Counter[int] = collections.Counter()
        self.delivered: list[int] = []
        self.produced = 0
        self.polls = 0

    def _on_disk(self) -> bytes:
        return self.path.read_bytes()

    def produce(self, topic: str, value: bytes, key: bytes, partition: int) -> None:
        v = decode_payload(value)
        invoke = b'"type":"invoke","f":"send","value":{"topic":"t","key":"%b","value":%d}'
        assert invoke % (key, v) in self._on_disk(), f"send {v} reached produce() before its invoke"
        self.produced += 1
        if self.produced >= self.limit:
            self.stop.set()
        if v % 11 == 5:
            raise BufferError("queue full")
        self.queue.append(FakeMsg(topic, value, key, partition, self.offsets[partition]))
        self.offsets[partition] += 1

    def poll(self, timeout: float) -> int:
        on_disk = self._on_disk()
        for v in self.delivered:  # nothing waits in memory across this (blocking) call
            assert (b'"value":%d,"partition"' % v in on_disk) or (
                b'"value":%d,"error"' % v in on_disk
            ), f"completion of {v} not written before the next poll()"
        self.delivered = []
        self.polls += 1
        queued, self.queue = self.queue, []
        for msg in queued:
            v = decode_payload(msg.value())
            err = KafkaError(KafkaError._MSG_TIMED_OUT) if v % 7 == 3 else None
            self.on_delivery(err, msg)
            self.delivered.append(v)
        return len(queued)

    def purge(self, **kwargs: object) -> None:
        pass

    def __len__(self) -> int:
        return len(self.queue)


def run_worker(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rate: float,
    limit: int,
    fake: type[FakeProducer] = FakeProducer,
) -> list:
    path = tmp_path / "history.jsonl"
    stop = threading.Event()
    fake.path, fake.stop, fake.limit = path, stop, limit
    monkeypatch.setattr(producer_module, "Producer", fake)
    spec = TestSpec(name="t", seed=1)
    spec.topic.name = "t"
    with HistoryWriter(path) as history:
        worker = ProducerWorker(
            spec, "fake:9092", history, Counter(), Counter(), rate, stop, flush_timeout_s=1.0
        )
        worker.start()
        assert stop.wait(30)
        assert worker.join(10)
    return list(read_history(path))


@pytest.mark.parametrize("rate", [0.0, 20_000.0])
def test_every_send_has_an_invoke_then_exactly_one_completion(tmp_path, monkeypatch, rate):
    ops = run_worker(tmp_path, monkeypatch, rate, limit=1500)
    invoked: dict[int, int] = {}
    completions: collections.Counter[int] = collections.Counter()
    for op in ops:
        assert op["f"] == "send" and op["process"] == 0
        v = op["value"]["value"]
        if op["type"] == "invoke":
            assert v not in invoked
            invoked[v] = op["index"]
        else:
            assert v in invoked, f"completion of {v} before its invoke"
            completions[v] += 1
            expected = "fail" if v % 11 == 5 else "info" if v % 7 == 3 else "ok"
            assert op["type"] == expected
            if expected == "ok":
                assert set(op["value"]) == {"topic", "key", "value", "partition", "offset"}
            else:
                assert op["value"]["error"] in ("_QUEUE_FULL", "_MSG_TIMED_OUT")
    assert len(invoked) >= 1500
    assert set(completions) == set(invoked) and set(completions.values()) == {1}


class DuplicateAnsweringProducer(FakeProducer):
    """Every third poll answers partition 0's batch DUPLICATE_SEQUENCE_NUMBER as librdkafka
    reports it: delivered, the first message at offset -1 (None), the others at 0, 1, ..."""

    duplicated: set[int]

    def poll(self, timeout: float) -> int:
        if self.polls % 3 == 1:
            # One batch has one outcome: leave out what the fake times out (value % 7 == 3).
            batch = [
                m for m in self.queue if m.partition() == 0 and decode_payload(m.value()) % 7 != 3
            ]
            for i, m in enumerate(batch):
                topic, value, key, partition, _ = m._fields
                m._fields = (topic, value, key, partition, None if i == 0 else i - 1)
                self.duplicated.add(decode_payload(value))
        return super().poll(timeout)


def test_a_duplicate_answer_is_acknowledged_without_an_offset(tmp_path, monkeypatch):
    """Acknowledged (``ok``: acked-lost counts it) but at no offset: librdkafka's
    -1, 0, 1, ... would otherwise be taken for places in the log."""
    DuplicateAnsweringProducer.duplicated = set()
    ops = run_worker(tmp_path, monkeypatch, 0.0, limit=1500, fake=DuplicateAnsweringProducer)
    oks = {op["value"]["value"]: op["value"] for op in ops if op["type"] == "ok"}
    answered = DuplicateAnsweringProducer.duplicated & set(oks)
    assert len(answered) > 20
    for v in answered:
        assert oks[v]["partition"] == 0 and oks[v]["offset"] is None
    placed = [v for v in oks if v not in answered]
    assert placed and all(oks[v]["offset"] is not None for v in placed)
    # Partition 0's other acks keep the fake's real offsets, strictly growing.
    zero = [oks[v]["offset"] for v in sorted(placed) if oks[v]["partition"] == 0]
    assert zero == sorted(zero) and len(set(zero)) == len(zero)


def test_an_unpaced_worker_writes_bursts(tmp_path, monkeypatch):
    ops = run_worker(tmp_path, monkeypatch, 0.0, limit=3000)
    times = collections.Counter((op["type"] == "invoke", op["time"]) for op in ops)
    # Many invokes share one write (one time stamp): far fewer writes than sends.
    assert max(n for (invoke, _), n in times.items() if invoke) > 100


def test_send_lines_match_the_general_encoder():
    lines = SendLines(12, 'odd "topic" 100%')
    key, value = b"17", 123456789
    invoke = {"topic": 'odd "topic" 100%', "key": "17", "value": value}
    assert lines.invoke(key, value) == encode_tail(12, "invoke", "send", invoke)
    ok = {**invoke, "partition": 5, "offset": 2**40}
    assert lines.ok(key, value, 5, 2**40) == encode_tail(12, "ok", "send", ok)
    fail = lines.other("fail", "17", value, error="_QUEUE_FULL")
    assert orjson.loads(b"{" + fail) == {
        "process": 12,
        "type": "fail",
        "f": "send",
        "value": {**invoke, "error": "_QUEUE_FULL"},
    }


def test_pacer_due_counts_what_is_due():
    p = Pacer(100.0, now=0.0)
    assert p.due(0.0, 500) == 1
    assert p.due(0.005, 500) == 0
    assert p.due(0.0505, 500) == 5  # 0.01 .. 0.05
    assert p.due(10.0, 50) == 50  # bounded by the limit
    assert Pacer(0.0, now=0.0).due(0.0, 500) == 500


def test_counter_take_is_unique_across_threads():
    c = Counter()
    out: list[int] = []
    lock = threading.Lock()

    def take():
        got = [v for _ in range(200) for v in c.take(7)]
        got.append(c.next())
        with lock:
            out.extend(got)

    run_in_threads(lambda _: take(), 4)
    assert sorted(out) == list(range(4 * 1401))
