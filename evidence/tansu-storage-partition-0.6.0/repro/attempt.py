#!/usr/bin/env python3
"""One attempt: idempotent producers (acks=all) write while the broker is cut off from
PostgreSQL; then every acknowledged value is looked for in the topic (consumed from the
start to the high watermark) and in PostgreSQL's record table.  Prints one JSON line.

No harness: confluent-kafka (librdkafka) and psql only.  Values are unique integers; each
message's payload is the value, a space, and padding to 100 bytes.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 6
PRODUCERS = 2
SIZE = 100


def log(msg: str) -> None:
    now = time.time()
    stamp = time.strftime("%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}"
    print(f"[{stamp}] {msg}", file=sys.stderr, flush=True)


def producer_conf(broker: str, n: int) -> dict:
    """The settings of the runs that found it: librdkafka's idempotent producer, acks=all."""
    return {
        "bootstrap.servers": broker,
        "client.id": f"repro-p{n}",
        "acks": "all",
        "enable.idempotence": True,
        "max.in.flight.requests.per.connection": 5,
        "linger.ms": 5,
        "request.timeout.ms": 5000,
        "delivery.timeout.ms": 15000,
        "socket.timeout.ms": 10000,
    }


class Writer(threading.Thread):
    """One producer sending values n, n+PRODUCERS, ... at ``rate``/s to partition value % 6."""

    def __init__(self, broker: str, topic: str, n: int, rate: float, stop: threading.Event):
        super().__init__(daemon=True)
        self.p = Producer(producer_conf(broker, n))
        self.topic, self.n, self.rate, self.stop = topic, n, rate, stop
        self.reports: dict[
            int, tuple[str | None, int, int]
        ] = {}  # value -> (error, partition, offset)
        self.sent = 0
        self.fatal = ""  # a fatal error ends this producer; its reports so far are kept

    def _report(self, err: KafkaError | None, msg) -> None:
        value = int(msg.value().split(b" ", 1)[0])
        self.reports[value] = (err.name() if err else None, msg.partition(), msg.offset())

    def run(self) -> None:
        t0, value = time.monotonic(), self.n
        while not self.stop.is_set() and not self.fatal:
            due = int((time.monotonic() - t0) * self.rate)
            while self.sent < due:
                payload = (b"%d " % value).ljust(SIZE, b"x")
                try:
                    self.p.produce(
                        self.topic, payload, partition=value % PARTITIONS, on_delivery=self._report
                    )
                except BufferError:
                    break
                except KafkaException as e:  # the producer failed fatally
                    self.fatal = str(e)
                    break
                self.sent += 1
                value += PRODUCERS
            try:
                self.p.poll(0.001)
            except KafkaException as e:
                self.fatal = str(e)
        if self.fatal:
            log(f"producer {self.n}: fatal: {self.fatal}")
        try:
            left = self.p.flush(30)
        except KafkaException as e:
            left, self.fatal = -1, self.fatal or str(e)
        if left:
            log(f"producer {self.n}: flush left {left} messages")


def group_reader(broker: str, topic: str, stop: threading.Event) -> None:
    """A consumer group member polling throughout, as in the runs (it also uses the broker)."""
    c = Consumer(
        {"bootstrap.servers": broker, "group.id": f"{topic}-g", "auto.offset.reset": "earliest"}
    )
    c.subscribe([topic])
    while not stop.is_set():
        c.poll(0.2)
    c.close()


def consume_all(broker: str, topic: str) -> tuple[Counter, bool]:
    """Every value in the topic, read from offset 0 until 5 s pass with nothing new, and
    whether each partition was read up to the high watermark its last fetch reported.

    Not ``get_watermark_offsets(cached=False)``: on PostgreSQL 15 Tansu 0.6.0's
    ListOffsets(latest) failed here with "subquery in FROM must have an alias".
    """
    c = Consumer(
        {
            "bootstrap.servers": broker,
            "group.id": f"check-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen: Counter = Counter()
    at = {p: 0 for p in range(PARTITIONS)}
    # Until 5 s pass with nothing new once records came (30 s before the first).
    idle_since, deadline = time.monotonic(), time.monotonic() + 180
    while time.monotonic() - idle_since < (5 if seen else 30) and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error():
                continue
            seen[int(m.value().split(b" ", 1)[0])] += 1
            at[m.partition()] = m.offset() + 1
            idle_since = time.monotonic()
    highs = {p: c.get_watermark_offsets(TopicPartition(topic, p), cached=True)[1] for p in at}
    c.close()
    return seen, all(at[p] >= highs[p] >= 0 for p in at)


def stored_rows(psql: str, topic: str) -> Counter:
    """Every value in PostgreSQL's record table for the topic."""
    q = (
        "select encode(r.v, 'escape') from record r join topition tp on r.topition = tp.id "
        f"join topic t on tp.topic = t.id where t.name = '{topic}'"
    )
    out = subprocess.run([*shlex.split(psql), "-c", q], check=True, capture_output=True, text=True)
    return Counter(int(line.split(" ", 1)[0]) for line in out.stdout.splitlines() if line)


def main() -> None:
    a = argparse.ArgumentParser()
    for flag in ("--broker", "--topic", "--psql", "--cut", "--heal"):
        a.add_argument(flag, required=True)
    a.add_argument("--attempt", type=int, default=1)
    a.add_argument("--rate", type=float, default=1000.0)
    a.add_argument("--before-s", type=float, default=8.0)
    a.add_argument("--cut-s", type=float, default=8.0)
    a.add_argument("--after-s", type=float, default=15.0)
    args = a.parse_args()

    admin = AdminClient({"bootstrap.servers": args.broker})
    admin.create_topics([NewTopic(args.topic, PARTITIONS, 1)])[args.topic].result(30)
    stop = threading.Event()
    writers = [
        Writer(args.broker, args.topic, n, args.rate / PRODUCERS, stop) for n in range(PRODUCERS)
    ]
    reader = threading.Thread(
        target=group_reader, args=(args.broker, args.topic, stop), daemon=True
    )
    reader.start()
    for w in writers:
        w.start()
    time.sleep(args.before_s)
    subprocess.run(shlex.split(args.cut), check=True)
    log("cut: broker <-> PostgreSQL")
    time.sleep(args.cut_s)
    subprocess.run(shlex.split(args.heal), check=True)
    log("healed")
    time.sleep(args.after_s)
    stop.set()
    for w in writers:
        w.join()
    reader.join(10)

    reports = {v: r for w in writers for v, r in w.reports.items()}
    acked = {v for v, (err, _, _) in reports.items() if err is None}
    consumed, complete = consume_all(args.broker, args.topic)
    if not complete:  # once more, with a new consumer
        log(f"read back stopped short ({sum(consumed.values())} records): reading again")
        consumed, complete = consume_all(args.broker, args.topic)
    rows = stored_rows(args.psql, args.topic)
    lost_consumed = sorted(acked - consumed.keys())
    lost_rows = sorted(acked - rows.keys())
    result = {
        "attempt": args.attempt,
        "topic": args.topic,
        "sent": sum(w.sent for w in writers),
        "acked": len(acked),
        # A DUPLICATE_SEQUENCE_NUMBER answer: librdkafka reports the batch's first message
        # at offset -1 (confluent-kafka gives None) and the others at 0, 1, 2, ...
        "acked_without_offset": sum(1 for v in acked if reports[v][2] is None),
        "failed": sum(1 for err, _, _ in reports.values() if err is not None),
        "no_report": sum(w.sent for w in writers) - len(reports),
        "read_back_complete": complete,
        "consumed": sum(consumed.values()),
        "rows": sum(rows.values()),
        "acked_not_consumed": len(lost_consumed),
        "acked_not_in_record_table": len(lost_rows),
        "stored_twice": sum(1 for n in rows.values() if n > 1),
        "producer_fatal": [w.fatal for w in writers if w.fatal],
        "lost_examples": [[v, *reports[v][1:]] for v in lost_rows[:10]],
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
