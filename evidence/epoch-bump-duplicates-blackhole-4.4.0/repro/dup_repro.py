#!/usr/bin/env python3
"""Does librdkafka's idempotent producer store an acknowledged value twice
when one broker's client traffic is dropped (not refused) for a few seconds?

Plain confluent-kafka, no kafka-chaos imports. Run it through ``run`` (next
to this file), which removes the fault's iptables rule whatever happens.

What it does, in order:
1. creates a fresh topic (13 partitions, RF 3, min.insync.replicas 2);
2. starts ``--producers`` idempotent producers (acks=all) with the settings
   of the evidence run (linger 5 ms, delivery/message timeout 5000 ms,
   request.timeout.ms 2000, max.in.flight 5, socket.timeout.ms 10000), each
   writing librdkafka's debug log (``debug=eos,msg,protocol,broker``) to
   its own file through ``logger=``;
3. produces uniquely numbered 100-byte values (value v goes to partition
   v % partitions, payload "v xxx...") at ``--rate`` per second in total;
4. at each ``--fault-at`` second, inside network namespace ``--netns`` (the
   broker's), appends ONE iptables rule that DROPs TCP segments from this
   host's address to the broker port, and deletes it ``--fault-s`` later;
5. flushes, then reads the whole topic back with a read_committed consumer
   and counts values stored at more than one offset among those whose
   delivery report succeeded;
6. for each duplicate, finds the ProduceRequests that carried it in the
   debug log (``Produce MessageSet ... MsgId ..., BaseSeq ..., PID{...}``)
   and, with ``--kafka-home`` and ``--data-dir``, the producer id and epoch
   of the batches holding it (kafka-dump-log.sh on the segment files).

Exit status: 1 an acknowledged value is stored twice; 0 none is;
2 the run could not be done or judged (setup failure, incomplete read).
Everything it saw goes to stdout and to ``<out>/summary.json``.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

EXIT_CLEAN, EXIT_DUP, EXIT_ERROR = 0, 1, 2

PRODUCE_RE = re.compile(
    r"(?P<topic>\S+) \[(?P<part>\d+)\]: Produce MessageSet with (?P<cnt>\d+) message\(s\) "
    r".*MsgId (?P<msgid>\d+), BaseSeq (?P<seq>-?\d+), "
    r"PID\{Id:(?P<pid>-?\d+),Epoch:(?P<epoch>-?\d+)\}"
)
BATCH_RE = re.compile(
    r"^baseOffset: (?P<base>\d+) lastOffset: (?P<last>\d+) count: \d+ baseSequence: (?P<seq>-?\d+) "
    r"lastSequence: (?P<lastseq>-?\d+) producerId: (?P<pid>-?\d+) "
    r"producerEpoch: (?P<epoch>-?\d+) .*"
    r"CreateTime: (?P<ct>\d+)"
)


def sh(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=30)


class Blackhole:
    """One iptables rule in the broker's namespace: DROP this host's TCP to one port."""

    def __init__(self, netns: str, port: int, tag: str) -> None:
        self.netns, self.port, self.tag = netns, port, tag
        out = sh(["ip", "-n", netns, "-o", "-4", "addr", "show", "dev", "eth0"]).stdout.split()
        self.broker_addr = out[out.index("inet") + 1].split("/")[0]
        route = sh(["ip", "route", "get", self.broker_addr]).stdout.split()
        self.source = route[route.index("src") + 1]  # this host's address as the broker sees it
        self.spec = [
            "INPUT",
            "-s",
            self.source,
            "-p",
            "tcp",
            "--dport",
            str(port),
            "-m",
            "comment",
            "--comment",
            tag,
            "-j",
            "DROP",
        ]

    def _ipt(self, op: str) -> None:
        sh(["ip", "netns", "exec", self.netns, "iptables", "-w", "5", op, *self.spec])

    def apply(self) -> None:
        self._ipt("-A")

    def heal(self) -> None:
        self._ipt("-D")


def payload(v: int, size: int) -> bytes:
    head = f"{v} ".encode()
    return head + b"x" * max(0, size - len(head))


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--netns", required=True, help="network namespace of the broker to blackhole")
    ap.add_argument("--port", type=int, default=9092)
    ap.add_argument("--rule-tag", default=f"epoch-dup-repro-{os.getpid()}")
    ap.add_argument("--out", required=True, help="directory for logs and summary")
    ap.add_argument("--topic", default=None)
    ap.add_argument("--partitions", type=int, default=13)
    ap.add_argument("--duration", type=float, default=40.0, help="seconds of load")
    ap.add_argument("--fault-at", default="6,22", help="comma-separated seconds into the load")
    ap.add_argument("--fault-s", type=float, default=8.0)
    ap.add_argument("--rate", type=float, default=1000.0, help="messages/s, all producers together")
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--message-bytes", type=int, default=100)
    ap.add_argument("--linger-ms", type=int, default=5)
    ap.add_argument("--message-timeout-ms", type=int, default=5000)
    ap.add_argument("--request-timeout-ms", type=int, default=2000)
    ap.add_argument("--socket-timeout-ms", type=int, default=10000)
    ap.add_argument("--max-in-flight", type=int, default=5)
    ap.add_argument("--debug", default="eos,msg,protocol,broker")
    ap.add_argument("--kafka-home", default=None, help="for kafka-dump-log.sh (optional)")
    ap.add_argument(
        "--data-dir", default=None, help="a broker's log dir, read with kafka-dump-log.sh"
    )
    ap.add_argument(
        "--keep-topic", action="store_true", help="keep the topic even without duplicates"
    )
    ap.add_argument(
        "--analyze-only",
        action="store_true",
        help="skip producing: judge the run already in --out (run.json, history)",
    )
    a = ap.parse_args()
    if a.analyze_only:
        return analyze(a, AdminClient({"bootstrap.servers": a.bootstrap}))

    os.makedirs(a.out, exist_ok=True)
    topic = a.topic or f"epoch-dup-{time.strftime('%Y%m%dt%H%M%S', time.gmtime())}"
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    try:
        fut = admin.create_topics(
            [NewTopic(topic, a.partitions, 3, config={"min.insync.replicas": "2"})]
        )
        fut[topic].result(30)
        bh = Blackhole(a.netns, a.port, a.rule_tag)
        md = admin.list_topics(topic, timeout=10)
        leaders = {p: m.leader for p, m in md.topics[topic].partitions.items()}
        brokers = {b.id: b.host for b in md.brokers.values()}
    except Exception as e:  # noqa: BLE001 - anything here means the run cannot be done
        print(f"cannot set up: {e!r}")
        return EXIT_ERROR
    target_ids = [i for i, h in brokers.items() if h == bh.broker_addr]
    target_parts = sorted(p for p, leader in leaders.items() if leader in target_ids)
    print(
        f"topic {topic}; blackhole {bh.source} -> {bh.broker_addr}:{a.port} in {a.netns} "
        f"(broker {target_ids}, leads partitions {target_parts})"
    )
    time.sleep(1.0)  # let the leaders settle before load

    fmt = logging.Formatter("%(asctime)s.%(msecs)03d %(message)s", "%Y-%m-%d %H:%M:%S")
    logging.Formatter.converter = time.gmtime
    producers, loggers = [], []
    for i in range(a.producers):
        lg = logging.getLogger(f"rdkafka.{i}")
        lg.propagate = False
        lg.setLevel(logging.DEBUG)
        fh = logging.FileHandler(os.path.join(a.out, f"producer{i}.debug.log"), mode="w")
        fh.setFormatter(fmt)
        lg.addHandler(fh)
        loggers.append(fh)
        producers.append(
            Producer(
                {
                    "bootstrap.servers": a.bootstrap,
                    "client.id": f"repro-{i}",
                    "enable.idempotence": True,
                    "acks": "all",
                    "max.in.flight.requests.per.connection": a.max_in_flight,
                    "linger.ms": a.linger_ms,
                    "message.timeout.ms": a.message_timeout_ms,
                    "request.timeout.ms": a.request_timeout_ms,
                    "socket.timeout.ms": a.socket_timeout_ms,
                    "debug": a.debug,
                    "logger": lg,
                }
            )
        )

    t0 = time.time()
    sent: dict[int, dict] = {}  # value -> producer, partition, msgid, t_send, and the report
    msgid = defaultdict(int)  # (producer, partition) -> librdkafka's per-partition msgid counter
    history = gzip.open(os.path.join(a.out, "history.jsonl.gz"), "wt")
    events: list[dict] = []

    def report(err, msg, v):
        rec = sent[v]
        rec["t_report"] = round(time.time() - t0, 3)
        if err is None:
            rec["ok"], rec["offset"] = True, msg.offset()
        else:
            rec["ok"], rec["error"] = False, err.name()
        history.write(json.dumps({"value": v, **rec}) + "\n")

    faults = [float(x) for x in a.fault_at.split(",") if x.strip()]
    fault_error: list[str] = []

    def nemesis():
        for at in faults:
            while time.time() - t0 < at:
                time.sleep(0.01)
            try:
                bh.apply()
                events.append({"f": "drop", "t": round(time.time() - t0, 3), "wall": time.time()})
                time.sleep(a.fault_s)
            except Exception as e:  # noqa: BLE001
                fault_error.append(repr(e))
            finally:
                try:
                    bh.heal()
                    events.append(
                        {"f": "heal", "t": round(time.time() - t0, 3), "wall": time.time()}
                    )
                except Exception as e:  # noqa: BLE001
                    fault_error.append(f"heal: {e!r}")

    nt = threading.Thread(target=nemesis, daemon=True)
    nt.start()
    v = 0
    interval = 1.0 / a.rate
    while True:
        now = time.time()
        if now - t0 >= a.duration:
            break
        due = int((now - t0) / interval)
        while v < due:
            i = v % a.producers
            part = v % a.partitions
            msgid[(i, part)] += 1
            sent[v] = {
                "p": i,
                "part": part,
                "msgid": msgid[(i, part)],
                "t_send": round(now - t0, 3),
            }
            try:
                producers[i].produce(
                    topic,
                    payload(v, a.message_bytes),
                    key=str(part).encode(),
                    partition=part,
                    on_delivery=lambda e, m, v=v: report(e, m, v),
                )
            except BufferError:
                msgid[(i, part)] -= 1
                sent[v]["ok"], sent[v]["error"] = False, "local-queue-full"
            v += 1
        for p in producers:
            p.poll(0)
        time.sleep(0.002)
    nt.join(timeout=a.fault_s + 15)
    for p in producers:
        p.flush(a.message_timeout_ms / 1000 + 10)
    for p in producers:
        p.poll(0.5)
    for x, r in sent.items():
        if "ok" not in r or r.get("error") == "local-queue-full":
            history.write(json.dumps({"value": x, **r}) + "\n")  # never reported: judged unreported
    history.close()
    for fh in loggers:
        fh.close()
    t_end = round(time.time() - t0, 3)
    run = {
        "topic": topic,
        "t0_wall": t0,
        "t_end": t_end,
        "faults": events,
        "fault_errors": fault_error,
        "blackholed": {"netns": a.netns, "broker": target_ids, "leads": target_parts},
        "producers": a.producers,
        "partitions": a.partitions,
    }
    with open(os.path.join(a.out, "run.json"), "w") as f:
        json.dump(run, f, indent=1)
    return analyze(a, admin)


def analyze(a, admin) -> int:
    """Read the topic back and judge; needs only ``<out>/run.json`` and the history."""
    with open(os.path.join(a.out, "run.json")) as f:
        run = json.load(f)
    topic, t0, t_end = run["topic"], run["t0_wall"], run["t_end"]
    events, fault_error = run["faults"], run["fault_errors"]
    a.partitions, a.producers = run["partitions"], run["producers"]
    sent: dict[int, dict] = {}
    with gzip.open(os.path.join(a.out, "history.jsonl.gz"), "rt") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line
            sent[rec.pop("value")] = rec
    unreported = [x for x, r in sent.items() if "ok" not in r]

    # Read the whole topic back, read_committed, from the start to the high watermark.
    c = Consumer(
        {
            "bootstrap.servers": a.bootstrap,
            "group.id": f"{topic}-check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    ends = {}
    for p in range(a.partitions):
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        ends[p] = hi
    c.assign([TopicPartition(topic, p, 0) for p in range(a.partitions)])
    where = defaultdict(list)  # value -> [(partition, offset)]
    done, deadline = set(p for p, e in ends.items() if e == 0), time.time() + 60
    while len(done) < a.partitions and time.time() < deadline:
        for m in c.consume(500, 1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    if m.offset() >= ends[m.partition()]:
                        done.add(m.partition())
                continue
            val = int(m.value().split(b" ", 1)[0])
            where[val].append((m.partition(), m.offset()))
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
    c.close()
    complete = len(done) == a.partitions

    acked = {x for x, r in sent.items() if r.get("ok")}
    failed = defaultdict(int)
    for r in sent.values():
        if r.get("ok") is False:
            failed[r["error"]] += 1
    dups = {x: where[x] for x in sorted(acked) if len(where[x]) > 1}
    dups_unacked = {x: where[x] for x, r in sent.items() if not r.get("ok") and len(where[x]) > 1}
    lost = [x for x in acked if not where[x]]
    strangers = [x for x in where if x not in sent]

    # Which ProduceRequests carried each duplicate (from the debug log).
    sends = defaultdict(
        list
    )  # (producer, partition) -> [(line_time, first_msgid, cnt, seq, pid, epoch)]
    for i in range(a.producers):
        with open(os.path.join(a.out, f"producer{i}.debug.log"), errors="replace") as f:
            for line in f:
                m = PRODUCE_RE.search(line)
                if m and m["topic"] == topic:
                    sends[(i, int(m["part"]))].append(
                        (
                            line[:23],
                            int(m["msgid"]),
                            int(m["cnt"]),
                            int(m["seq"]),
                            int(m["pid"]),
                            int(m["epoch"]),
                        )
                    )

    def carried(x):
        r = sent[x]
        return [
            {"logged": t, "msgid": f"{mid}-{mid + n - 1}", "base_seq": s, "pid": pid, "epoch": ep}
            for t, mid, n, s, pid, ep in sends[(r["p"], r["part"])]
            if mid <= r["msgid"] < mid + n
        ]

    # Producer id and epoch of the stored batches (optional: kafka-dump-log.sh on one replica).
    batches = defaultdict(list)
    if (dups or dups_unacked) and a.kafka_home and a.data_dir:
        parts = sorted(
            {p for locs in list(dups.values()) + list(dups_unacked.values()) for p, _ in locs}
        )
        files = [
            f
            for p in parts
            for f in sorted(glob.glob(os.path.join(a.data_dir, f"{topic}-{p}", "*.log")))
        ]
        tool = os.path.join(a.kafka_home, "bin", "kafka-dump-log.sh")
        if os.path.exists(tool):
            cmd = [tool]
        else:  # a distribution without bin/ (kafka-chaos's): the tool class on the jars' classpath
            cp = f"{a.kafka_home}/libs/*:{a.kafka_home}/tools/*"
            cmd = ["java", "-cp", cp, "org.apache.kafka.tools.DumpLogSegments"]
        out = subprocess.run(
            [*cmd, "--files", ",".join(files)], capture_output=True, text=True, timeout=300
        ).stdout
        with open(os.path.join(a.out, "dump-batches.txt"), "w") as f:
            f.write(out)
        cur = None
        for line in out.splitlines():
            if line.startswith("Dumping "):
                cur = int(line.rsplit("/", 2)[-2].rsplit("-", 1)[1])
            m = BATCH_RE.match(line)
            if m and cur is not None:
                batches[cur].append(
                    {k: int(m[k]) for k in ("base", "last", "seq", "lastseq", "pid", "epoch", "ct")}
                )

    def batch_of(p, off):
        for b in batches.get(p, []):
            if b["base"] <= off <= b["last"]:
                return {
                    "offsets": f"{b['base']}-{b['last']}",
                    "seq": f"{b['seq']}-{b['lastseq']}",
                    "pid": b["pid"],
                    "epoch": b["epoch"],
                    "max_create_time": b["ct"],
                }
        return None

    detail = []
    for x, locs in list(dups.items()) + list(dups_unacked.items()):
        r = sent[x]
        detail.append(
            {
                "value": x,
                **r,
                "stored_at": [
                    {"partition": p, "offset": o, "batch": batch_of(p, o)} for p, o in locs
                ],
                "sent_in": carried(x),
            }
        )

    # The story of each pair of sends in the debug log: every line about that partition that
    # names the first MsgId of either send (the PRODUCE lines, "encountered error" or
    # "delivered", TIMEOUT lines whose range starts there).
    stories = {}
    for e in detail:
        key = (e["p"], e["part"], tuple(s["msgid"] for s in e["sent_in"]))
        if key in stories:
            continue
        firsts = {s["msgid"].split("-")[0] for s in e["sent_in"]}
        pat = re.compile(rf"\[{e['part']}\]: .*MsgId ({'|'.join(sorted(firsts))})\b")
        lines = []
        with open(os.path.join(a.out, f"producer{e['p']}.debug.log"), errors="replace") as f:
            for line in f:
                if topic in line and pat.search(line):
                    lines.append(line.rstrip()[:400])
        stories[key] = {"producer": e["p"], "partition": e["part"], "values": 0, "log": lines}
    for e in detail:
        stories[(e["p"], e["part"], tuple(s["msgid"] for s in e["sent_in"]))]["values"] += 1

    summary = {
        "topic": topic,
        "librdkafka": __import__("confluent_kafka").libversion()[0],
        # version() is a string in confluent-kafka 2.16 (a tuple in older releases).
        "confluent_kafka": _text_version(__import__("confluent_kafka").version()),
        "t0_wall": t0,
        "t_end": t_end,
        "faults": events,
        "fault_errors": fault_error,
        "blackholed": run["blackholed"],
        "produced": len(sent),
        "acked": len(acked),
        "failed": dict(failed),
        "unreported": len(unreported),
        "read_complete": complete,
        "stored": sum(len(x) for x in where.values()),
        "acked_lost": len(lost),
        "strangers": len(strangers),
        "duplicated_acked": len(dups),
        "duplicated_unacked": len(dups_unacked),
        "dup_partitions": sorted({p for locs in dups.values() for p, _ in locs}),
        "stories": list(stories.values()),
        "examples": detail[:3],
    }
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump({**summary, "all_duplicates": detail}, f, indent=1)
    print(json.dumps(summary, indent=1))

    if not (dups or dups_unacked) and not a.keep_topic:
        try:
            admin.delete_topics([topic])[topic].result(30)
        except Exception:  # noqa: BLE001 - only housekeeping
            pass
    if dups:
        print(f"DUPLICATES: {len(dups)} acknowledged value(s) stored twice")
        return EXIT_DUP
    if fault_error or not complete or unreported:
        print(
            f"could not judge: fault errors {fault_error}, read complete {complete}, "
            f"unreported {len(unreported)}"
        )
        return EXIT_ERROR
    print("no acknowledged value stored twice")
    return EXIT_CLEAN


def _text_version(v: object) -> str:
    """The version string, whether the binding returns a string or a (string, int) tuple."""
    return v if isinstance(v, str) else str(v[0])  # type: ignore[index]


if __name__ == "__main__":
    try:
        rc = main()
    except Exception:  # noqa: BLE001 - a crash is "could not run", never "duplicate"
        import traceback

        traceback.print_exc()
        rc = EXIT_ERROR
    sys.exit(rc)
