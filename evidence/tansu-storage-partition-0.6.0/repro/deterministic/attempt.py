#!/usr/bin/env python3
"""One deterministic attempt: batch A stored twice, batch B acknowledged and stored nowhere.

1. A warm-up message W is produced and acknowledged (the producer has an id and sequence 0).
2. A psql session takes the partition's watermark row with ``FOR UPDATE``.  Tansu's produce
   transaction reads the stored producer sequence S without a lock
   (producer_select_for_update.sql), upserts producer_detail (sequence + count), and only
   then runs watermark_select_for_update.sql (``for no key update``), which now waits.
3. Batch A (one message) is produced.  Its request times out (socket.timeout.ms), the
   client disconnects and sends A again on a new connection.  The retry reads the committed
   S too, passes the check, and waits on the first transaction's producer_detail row.
4. Once two Tansu backends wait on locks, the psql session commits.  The original commits
   (S + 1); the retry's upsert adds 1 again (S + 2) and stores A a second time.
5. Batch B (base S + 1) is answered DUPLICATE_SEQUENCE_NUMBER, which librdkafka reports as
   delivered.  B is in no row of the record table.

No harness: confluent-kafka (librdkafka) and psql only.  Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import subprocess
import sys
import time
from collections import Counter

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def log(msg: str) -> None:
    now = time.time()
    stamp = time.strftime("%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}"
    print(f"[{stamp}] {msg}", file=sys.stderr, flush=True)


def sql(psql: str, query: str) -> list[str]:
    """Rows of one query, run in a psql session of its own."""
    out = subprocess.run(
        [*shlex.split(psql), "-c", query], check=True, capture_output=True, text=True
    )
    return [line for line in out.stdout.splitlines() if line]


def lock_waiters(psql: str) -> list[str]:
    """Backends (other than psql's) waiting on a lock, with the start of their query."""
    return sql(
        psql,
        "select pid || ' ' || left(regexp_replace(query, '\\s+', ' ', 'g'), 60) "
        "from pg_stat_activity where wait_event_type = 'Lock' "
        "and application_name <> 'psql'",
    )


def stored(psql: str, topic: str) -> Counter:
    """How many rows of the record table hold each value of the topic."""
    rows = sql(
        psql,
        "select encode(r.v, 'escape') from record r join topition tp "
        "on r.topition = tp.id join topic t on tp.topic = t.id "
        f"where t.name = '{topic}'",
    )
    return Counter(rows)


class Reports:
    """Delivery reports by value: (error name or None, offset or None)."""

    def __init__(self) -> None:
        self.by_value: dict[str, tuple[str | None, int | None]] = {}

    def __call__(self, err, msg) -> None:
        self.by_value[msg.value().decode()] = (err.name() if err else None, msg.offset())


def produce_one(p: Producer, topic: str, value: str, reports: Reports, wait_s: float) -> None:
    p.produce(topic, value.encode(), partition=0, on_delivery=reports)
    deadline = time.monotonic() + wait_s
    while value not in reports.by_value and time.monotonic() < deadline:
        p.poll(0.05)


def main() -> None:
    a = argparse.ArgumentParser()
    for flag in ("--broker", "--topic", "--psql", "--client-log", "--tansu-log"):
        a.add_argument(flag, required=True)
    a.add_argument("--attempt", type=int, default=1)
    a.add_argument("--timeout-ms", type=int, default=2000)
    a.add_argument("--wait-s", type=float, default=30.0, help="longest wait for two waiters")
    args = a.parse_args()

    admin = AdminClient({"bootstrap.servers": args.broker})
    admin.create_topics([NewTopic(args.topic, 1, 1)])[args.topic].result(30)

    client_log = logging.getLogger("librdkafka")
    client_log.addHandler(logging.FileHandler(args.client_log))
    client_log.setLevel(logging.DEBUG)
    p = Producer(
        {
            "bootstrap.servers": args.broker,
            "client.id": "det",
            "acks": "all",
            "enable.idempotence": True,
            "max.in.flight.requests.per.connection": 1,
            "linger.ms": 0,
            # librdkafka times a ProduceRequest out locally after socket.timeout.ms (the runs
            # that found the bug timed out 10.7 s after the send, with socket.timeout.ms=10000);
            # request.timeout.ms is the ack timeout sent to the broker.
            "request.timeout.ms": args.timeout_ms,
            "socket.timeout.ms": args.timeout_ms,
            "delivery.timeout.ms": 120000,
            "debug": "msg,protocol,eos,broker",
            "logger": client_log,
        }
    )
    reports = Reports()
    w, va, vb = f"{args.topic}:W", f"{args.topic}:A", f"{args.topic}:B"
    result: dict = {"attempt": args.attempt, "topic": args.topic}

    produce_one(p, args.topic, w, reports, 30)
    result["w_report"] = reports.by_value.get(w)

    # Hold the watermark row of partition 0 (FOR UPDATE conflicts with FOR NO KEY UPDATE).
    holder = subprocess.Popen(
        [*shlex.split(args.psql)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdin and holder.stdout
    holder.stdin.write(
        "begin;\nselect 'locked ' || w.id from watermark w join topition tp on w.topition = tp.id"
        f" join topic t on tp.topic = t.id where t.name = '{args.topic}' and tp.partition = 0"
        " for update of w;\n"
    )
    holder.stdin.flush()
    result["holder"] = holder.stdout.readline().strip()
    log(f"psql holds the watermark row: {result['holder']}")

    p.produce(args.topic, va.encode(), partition=0, on_delivery=reports)
    t0, waiters = time.monotonic(), []
    while time.monotonic() - t0 < args.wait_s:
        p.poll(0.1)
        waiters = lock_waiters(args.psql)
        if len(waiters) >= 2:
            break
    result["waiters_at_release"] = waiters
    result["held_s"] = round(time.monotonic() - t0, 2)
    log(f"releasing after {result['held_s']} s; waiting: {waiters}")
    holder.stdin.write("commit;\n")
    holder.stdin.close()
    holder.wait(10)

    deadline = time.monotonic() + 60
    while va not in reports.by_value and time.monotonic() < deadline:
        p.poll(0.05)
    result["a_report"] = reports.by_value.get(va)

    try:
        produce_one(p, args.topic, vb, reports, 60)
    except KafkaException as e:
        result["b_produce_error"] = str(e)
    result["b_report"] = reports.by_value.get(vb)
    try:  # a later send may fail fatally (OUT_OF_ORDER_SEQUENCE_NUMBER); not needed here
        p.flush(5)
    except KafkaException as e:
        result["flush_error"] = str(e)

    rows = stored(args.psql, args.topic)
    result["rows"] = {"W": rows.get(w, 0), "A": rows.get(va, 0), "B": rows.get(vb, 0)}
    for handler in client_log.handlers:
        handler.flush()
    with open(args.client_log, encoding="utf-8", errors="replace") as f:
        dup = [
            line.strip()
            for line in f
            if "DUPLICATE_SEQUENCE_NUMBER" in line or "duplicate sequence number" in line
        ]
    result["client_dupseq_lines"] = len(dup)
    result["client_dupseq_example"] = dup[0][:300] if dup else None
    with open(args.tansu_log, encoding="utf-8", errors="replace") as f:
        result["tansu_duplicate_lines"] = sum("DuplicateSequenceNumber" in line for line in f)
    b_acked = result["b_report"] is not None and result["b_report"][0] is None
    result["b_acked"] = b_acked
    result["reproduced"] = bool(rows.get(va, 0) >= 2 and b_acked and rows.get(vb, 0) == 0 and dup)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
