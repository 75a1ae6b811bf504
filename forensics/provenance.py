"""For each acknowledged value that was lost: which replicas had held it, and which lost it.

Written as ``provenance.json`` of a run, from its files only:

- the history: the ack (partition, offset, time) and the final drain's reads,
  which make a value lost (as ``acked-lost`` counts it).  An ack without an
  offset (a batch answered DUPLICATE_SEQUENCE_NUMBER: workloads/delivery_offsets.py)
  is placed where a consumer read the value, else its offset stays unknown;
- ``cluster-state.jsonl``: the leader and ISR sampled around the ack.  With
  acks=all Kafka acknowledges once every ISR member has the record, so a
  replica in the ISR of the samples just before *and* just after the ack
  held it in memory then; anything else is "cannot tell" (the ISR may have
  changed between samples), never a guess;
- ``disk-faults.json``: the log end offset each replica's broker came back
  with after the first disk fault after the ack that it came back from
  (``came_back``); at or below the value's offset, the record had not
  reached that broker's disk;
- the replica dumps under ``replicas/``: whether each replica holds the value
  now, and what it holds at the value's offset instead.
"""

from __future__ import annotations

import bisect
import gzip
import json
import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kafka_chaos.forensics.log_dump import ReplicaLog, parse_dump
from kafka_chaos.harness.run_files import NEMESIS, read_lines

log = logging.getLogger(__name__)

RESULT = "provenance.json"
MAX_VALUES = 200  # values kept one by one; the tallies cover all of them


@dataclass(frozen=True)
class Ack:
    value: int
    partition: int
    offset: int | None  # None: acknowledged without one, and never read
    time_s: float


def lost_acks(history: Path, topic: str) -> list[Ack]:
    """Acked sends of ``topic`` the final drain did not read, at or above its log start.

    An ack without an offset takes the offset a consumer read its value at
    (``acked-lost`` places it so too); never read, it is lost only where the log
    start is 0: above, retention may have removed it, which the checker leaves
    undecided.
    """
    acked: dict[int, Ack] = {}
    drained: set[int] = set()
    read_at: dict[tuple[int, int], int] = {}  # (partition, value) -> lowest offset read
    log_start: dict[int, int] = {}
    for op in read_lines(history):
        if op.get("process") == NEMESIS:
            continue
        v = op.get("value")
        f, kind = op.get("f"), op.get("type")
        if f == "send" and kind == "ok" and isinstance(v, dict) and v.get("topic") == topic:
            offset = v.get("offset")
            if isinstance(v.get("partition"), int) and (offset is None or isinstance(offset, int)):
                acked[v["value"]] = Ack(v["value"], v["partition"], offset, op["time"] / 1e9)
        elif f == "poll" and kind == "ok" and isinstance(v, dict):
            mine = [r for r in v.get("records") or [] if r.get("topic") == topic]
            if v.get("final"):
                drained.update(r["value"] for r in mine)
            for r in mine:
                key = (r["partition"], r["value"])
                read_at[key] = min(r["offset"], read_at.get(key, r["offset"]))
        elif f == "drain" and isinstance(v, dict) and v.get("topic") == topic:
            if isinstance(v.get("log_start"), int):
                log_start[v["partition"]] = v["log_start"]
    lost = []
    for a in acked.values():
        if a.value in drained:
            continue
        if a.offset is None:
            a = replace(a, offset=read_at.get((a.partition, a.value)))
        start = log_start.get(a.partition, 0)
        if (a.offset is None and start == 0) or (a.offset is not None and a.offset >= start):
            lost.append(a)
    return sorted(lost, key=lambda a: (a.partition, a.offset is None, a.offset or 0))


class StateSamples:
    """Leader and ISR of each partition over time, from ``cluster-state.jsonl``."""

    def __init__(self, path: Path, topic: str) -> None:
        self.times: list[float] = []
        self.parts: list[dict[int, dict[str, Any]]] = []
        if not path.is_file():
            return
        for line in path.read_text(errors="replace").splitlines():
            try:
                sample = json.loads(line)
            except ValueError:
                continue
            if sample.get("error") or not sample.get("partitions"):
                continue
            self.times.append(sample["time"] / 1e9)
            self.parts.append(
                {p["partition"]: p for p in sample["partitions"] if p.get("topic") == topic}
            )

    def around(
        self, partition: int, t: float
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None, float | None]:
        """The partition's samples just before and just after ``t``, and the first one's time."""
        i = bisect.bisect_right(self.times, t)
        before = self.parts[i - 1].get(partition) if i > 0 else None
        after = self.parts[i].get(partition) if i < len(self.parts) else None
        return before, after, (self.times[i - 1] if i > 0 else None)


def live_logs(run_dir: Path, topic: str) -> dict[str, dict[int, ReplicaLog]]:
    """Each node's live copy of each partition, from the replica verification's raw dumps."""
    out: dict[str, dict[int, ReplicaLog]] = {}
    for dump in sorted((run_dir / "replicas").glob("*-dump-log-segments.txt.gz")):
        node = dump.name.removesuffix("-dump-log-segments.txt.gz")
        with gzip.open(dump, "rt", errors="replace") as lines:
            logs = parse_dump(lines)
        mine: dict[int, ReplicaLog] = {}
        for directory, replica in logs.items():
            parent, _, leaf = directory.rpartition("/")
            name, _, number = leaf.rpartition("-")
            if parent.endswith("/data/kafka") and name == topic and number.isdigit():
                mine[int(number)] = replica
        out[node] = mine
    return out


def broker_names(replicas: dict[str, Any]) -> dict[int, str]:
    """Broker id -> node name, from replicas.json's comparisons."""
    names: dict[int, str] = {}
    for p in replicas.get("partitions") or []:
        for c in p.get("compared") or []:
            if isinstance(c.get("broker_id"), int) and c.get("node"):
                names[c["broker_id"]] = c["node"]
    return names


def first_cut(faults: list[dict[str, Any]], node: str, after_s: float) -> dict[str, Any] | None:
    """The first disk fault that hit ``node`` after ``after_s``."""
    for f in faults:
        if node in f.get("targets", []) and (f.get("start_s") or 0) >= after_s:
            return f
    return None


def came_back(
    faults: list[dict[str, Any]], node: str, partition: int, after_s: float
) -> tuple[dict[str, Any] | None, int | None]:
    """The first disk fault after ``after_s`` that ``node`` came back from with a log end
    for ``partition``, and that log end; else the first fault that hit it, and None.

    A broker cut again while still loading its logs (seen on a loaded machine:
    3 of 13 partitions loaded before the next cut) never came back from the
    first cut for the rest; the next cut it came back from is what it kept.
    """
    for f in faults:
        if node not in f.get("targets", []) or (f.get("start_s") or 0) < after_s:
            continue
        end = ((f.get("nodes") or {}).get(node) or {}).get("recovered_log_end", {})
        if end.get(str(partition)) is not None:
            return f, end[str(partition)]
    return first_cut(faults, node, after_s), None


def provenance(run_dir: Path, topic: str) -> dict[str, Any]:
    """The provenance of every lost value of the run (see the module doc)."""
    run_dir = Path(run_dir)
    config = _json(run_dir / "config.json")
    acks_all = str((config.get("producer") or {}).get("acks", "all")) in ("all", "-1")
    replicas = _json(run_dir / "replicas.json")
    faults = _json(run_dir / "disk-faults.json").get("faults") or []
    names = broker_names(replicas)
    samples = StateSamples(run_dir / "cluster-state.jsonl", topic)
    logs = live_logs(run_dir, topic)
    held_now = {
        node: {p: set(r.records.values()) for p, r in parts.items()} for node, parts in logs.items()
    }
    lost = lost_acks(run_dir / "history.jsonl", topic)
    values: list[dict[str, Any]] = []
    by_node: dict[str, Counter[str]] = defaultdict(Counter)
    by_partition: dict[int, dict[str, Any]] = {}
    for ack in lost:
        entry = _value(ack, samples, names, faults, logs, held_now, acks_all)
        part = by_partition.setdefault(
            ack.partition, {"partition": ack.partition, "lost": 0, "first": None,
                            "last": None, "nodes": defaultdict(Counter)}
        )  # fmt: skip
        part["lost"] += 1
        if ack.offset is not None:  # sorted: placed acks first, by offset
            part["first"] = ack.offset if part["first"] is None else part["first"]
            part["last"] = ack.offset
        for r in entry["replicas"]:
            for key in ("held_at_ack", "came_back_without", "holds_now"):
                if r[key] is not None:
                    tally = f"{key}:{'yes' if r[key] else 'no'}"
                    by_node[r["node"]][tally] += 1
                    part["nodes"][r["node"]][tally] += 1
        if len(values) < MAX_VALUES:
            values.append(entry)
    checker = (_json(run_dir / "results.json").get("summary") or {}).get("acked_lost")
    return {
        "topic": topic,
        "lost": len(lost),
        "checker_acked_lost": checker,
        "acks_all": acks_all,
        "by_node": {n: dict(c) for n, c in sorted(by_node.items())},
        "partitions": [
            {**p, "nodes": {n: dict(c) for n, c in sorted(p["nodes"].items())}}
            for _, p in sorted(by_partition.items())
        ],
        "values": values,
        "values_dropped": max(0, len(lost) - MAX_VALUES),
    }


def _value(
    ack: Ack,
    samples: StateSamples,
    names: dict[int, str],
    faults: list[dict[str, Any]],
    logs: dict[str, dict[int, ReplicaLog]],
    held_now: dict[str, dict[int, set[str]]],
    acks_all: bool,
) -> dict[str, Any]:
    before, after, sample_s = samples.around(ack.partition, ack.time_s)
    steady = before is not None and after is not None
    leader = before.get("leader") if before else None
    if not steady or after.get("leader") != leader:
        leader = None  # the leader may have changed between the samples
    isr_before = set(before.get("isr") or []) if before else set()
    isr_after = set(after.get("isr") or []) if after else set()
    brokers = list((before or after or {}).get("replicas") or [])
    replicas = []
    for broker in brokers:
        node = names.get(broker, f"broker {broker}")
        held: bool | None = None
        if acks_all and steady and broker in isr_before and broker in isr_after:
            held = True
        cut, recovered = came_back(faults, node, ack.partition, ack.time_s)
        replica = logs.get(node, {}).get(ack.partition)
        holds = (
            None
            if node not in held_now
            else str(ack.value) in held_now[node].get(ack.partition, set())
        )
        replicas.append(
            {
                "node": node,
                "broker_id": broker,
                "held_at_ack": held,
                "cut": cut["id"] if cut else None,
                "recovered_log_end": recovered,
                "came_back_without": (
                    None if recovered is None or ack.offset is None else recovered <= ack.offset
                ),
                "holds_now": holds,
                "now_at_offset": (
                    replica.records.get(ack.offset) if replica and ack.offset is not None else None
                ),
            }
        )
    return {
        "value": ack.value,
        "partition": ack.partition,
        "offset": ack.offset,
        "acked_s": round(ack.time_s, 3),
        "sample_s": round(sample_s, 3) if sample_s is not None else None,
        "leader": names.get(leader, leader) if leader is not None else None,
        "replicas": replicas,
    }


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write(run_dir: Path, topic: str) -> dict[str, Any]:
    """Write ``provenance.json`` (after replica verification and the disk-fault account)."""
    result = provenance(Path(run_dir), topic)
    (Path(run_dir) / RESULT).write_text(json.dumps(result, indent=1) + "\n")
    return result
