"""After the heal: do the replicas hold the same log?  Answered from the brokers' disks.

The clients' history can only suggest that a log was rewritten; this step
reads every replica's segment files with Kafka's own DumpLogSegments over
SSH and compares them offset by offset, as of the high watermark once all
replicas are back in sync.  Kafka's rejoin truncates a deposed leader's
divergent tail, so that evidence would be gone by then: faults that kill a
leader it may be deposed from (``nemeses.unclean``) keep a copy of its log
taken while it was down (``harness.log_copies``), and that copy is compared
too.  The truncations themselves are read from the brokers' server.log.

Writes ``replicas.json`` (the contract is in docs/results.md) and the raw
tool output under ``replicas/`` of the run directory.
"""

from __future__ import annotations

import gzip
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from shlex import quote
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from kafka_chaos.forensics import host_dump
from kafka_chaos.forensics.log_dump import (
    CORRUPTION_NEEDLES,
    ReplicaLog,
    corruptions,
    merge_truncations,
    parse_checkpoint,
    parse_dump,
    truncations,
)
from kafka_chaos.forensics.replica_compare import (
    compare_before_rejoin,
    compare_follower,
    stored_twice,
)
from kafka_chaos.forensics.segment_dump import dump_segments
from kafka_chaos.harness import admin
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.fan_out import on_nodes
from kafka_chaos.harness.history import wall_clock_on_history_axis
from kafka_chaos.harness.kafka_clients import CLIENT_LOGGER, close_quietly
from kafka_chaos.harness.log_copies import CHECKPOINT, copies_dir
from kafka_chaos.harness.node import Node

log = logging.getLogger(__name__)

RESULT = "replicas.json"
RAW_DIR = "replicas"
IN_SYNC_TIMEOUT_S = 60.0
ADMIN_TIMEOUT_S = 10.0
# Backstop for one node's reads and dump (on the node, or fetched and dumped
# here by ``host_dump``): each command is bounded, all of them well within it.
NODE_DUMP_TIMEOUT_S = 1800.0


@dataclass
class NodeDump:
    """What one node holds: its logs by directory, where the raw dump went, and its truncations."""

    node: Node
    logs: dict[str, ReplicaLog] = field(default_factory=dict)
    raw: str | None = None
    error: str | None = None
    copy_watermarks: dict[int, dict[int, int]] = field(default_factory=dict)  # fault -> p -> hw
    truncations: list[dict[str, Any]] = field(default_factory=list)
    corruptions: list[dict[str, Any]] = field(default_factory=list)
    unreadable: list[dict[str, Any]] = field(default_factory=list)  # segments the dump stopped in

    def invalid_batches(self) -> list[dict[str, Any]]:
        """Batches whose CRC fails, as DumpLogSegments read them (damage Kafka never re-read)."""
        return [
            {"node": self.node.name, "broker_id": self.node.node_id,
             "partition": _partition_of(b.segment), **asdict(b)}
            for log in self.logs.values()
            for b in log.invalid
        ]  # fmt: skip


def _partition_of(path: str) -> int | None:
    """The partition of a segment file's path (``.../<topic>-<p>/<base>.log``)."""
    part = path.rsplit("/", 2)[-2].rpartition("-")[2] if path.count("/") >= 1 else ""
    return int(part) if part.isdigit() else None


def verify(
    cluster: Cluster, topic: str, run_dir: Path, clock_ns: Callable[[], int] | None = None
) -> dict[str, Any]:
    """Compare every replica of ``topic``; write and return replicas.json.

    ``clock_ns`` is the history's clock: with it each truncation also gets
    ``history_s``, its time on the history's axis (brokers log wall-clock
    time, the history a monotonic clock from its start).
    """
    run_dir = Path(run_dir)
    result: dict[str, Any] = {"topic": topic, "complete": False, "error": None}
    on_history_axis = wall_clock_on_history_axis(clock_ns)
    try:
        states, waited = wait_in_sync(cluster, topic, IN_SYNC_TIMEOUT_S)
        result["in_sync_wait_s"] = waited
        high = high_watermarks(cluster.bootstrap_servers(), topic, [s.partition for s in states])
        dumped = on_nodes(
            cluster.nodes,
            lambda n: dump_node(cluster, n, topic, run_dir),
            timeout_s=NODE_DUMP_TIMEOUT_S,
            what="dumping replicas",
        )
        # dump_node keeps its own errors: only a stuck node fails here, one unread dump.
        dumps = [o.value or NodeDump(o.node, error=str(o.error)) for o in dumped]
        result["partitions"] = [_partition_result(cluster, topic, s, high, dumps) for s in states]
        result["truncations"] = [t for d in dumps for t in d.truncations]
        result["corruptions"] = [c for d in dumps for c in d.corruptions]
        result["unreadable"] = [u for d in dumps for u in d.unreadable]
        result["invalid_batches"] = [b for d in dumps for b in d.invalid_batches()]
        if on_history_axis is not None:
            for t in result["truncations"]:
                if t["time_ms"] is not None:
                    t["history_s"] = on_history_axis(t["time_ms"])
        result["complete"] = all(
            p["error"] is None and p["in_sync"] for p in result["partitions"]
        ) and all(d.error is None for d in dumps)
    except HarnessError as e:
        result["error"] = str(e)
    except Exception as e:  # a verification failure must not cost the run its history
        log.exception("replica verification failed")
        result["error"] = f"{type(e).__name__}: {e}"
    finally:
        for node in cluster.nodes:
            _forget_copies(node)
    result.setdefault("partitions", [])
    result.setdefault("truncations", [])
    result.setdefault("corruptions", [])
    result.setdefault("unreadable", [])
    result.setdefault("invalid_batches", [])
    (run_dir / RESULT).write_text(json.dumps(result, indent=1) + "\n")
    log.info("%s", summary(result))
    return result


def summary(result: dict[str, Any]) -> str:
    """One line in words for the harness log and ``kafka-chaos run``."""
    if result.get("error"):
        return f"replicas: not verified: {result['error']}"
    parts = result.get("partitions", [])
    said = []
    for p in parts:
        for c in p.get("compared", []):
            if c.get("agree") is not False:
                continue
            spans = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in c["diverged_ranges"])
            when = "before it rejoined" if c["source"] == "before-rejoin" else "now"
            said.append(
                f"partition {p['partition']}: {c['node']}'s log {when} differs from the "
                f"leader's at offsets {spans} ({c['lost_values']} values now on no replica)"
            )
    return "replicas: " + "; ".join(
        (said or [_agreement(parts)]) + _stored_twice(parts) + _recovered(result) + _damaged(result)
    )


def _damaged(result: dict[str, Any]) -> list[str]:
    """Damage the brokers did not find, found by reading the segments (a closed one)."""
    said = [
        f"{b['node']}'s partition {b['partition']} holds a batch that fails its CRC "
        f"(offsets {b['base_offset']}-{b['last_offset']}, {b['segment'].rsplit('/', 1)[-1]})"
        if b.get("invalid_bytes") is None
        else f"{b['node']}'s partition {b['partition']} ends a segment with "
        f"{b['invalid_bytes']} bytes that hold no whole batch "
        f"({b['segment'].rsplit('/', 1)[-1]}): the offsets in them cannot be read"
        for b in result.get("invalid_batches", [])
    ]
    said += [
        f"{u['node']}'s partition {u['partition']} cannot be read past a damaged batch "
        f"({u['segment'].rsplit('/', 1)[-1]}: {u['error']})"
        for u in result.get("unreadable", [])
    ]
    return said


def _recovered(result: dict[str, Any]) -> list[str]:
    """Damaged segments the brokers found on start (corrupt-segment, a bad disk)."""
    cut = {(c["node"], c["partition"]) for c in result.get("corruptions", [])}
    return [
        f"{node} found a damaged segment of partition {p} on start and cut it back"
        for node, p in sorted(cut)
    ]


def _stored_twice(parts: list[dict[str, Any]]) -> list[str]:
    return [
        f"partition {p['partition']}: {t['values']} values stored twice, {t['epoch_bump']} "
        "of them sent again by their producer under a bumped epoch"
        for p in parts
        if (t := p.get("stored_twice"))
    ]


def _agreement(parts: list[dict[str, Any]]) -> str:
    behind = sorted(
        {p["partition"] for p in parts for c in p.get("compared", []) if c.get("in_isr") is False}
    )
    unread = [p["partition"] for p in parts if p.get("agree") is None]
    if unread:
        why = f" (a follower outside the ISR in {behind})" if behind else ""
        return f"could not compare partitions {unread}{why}"
    return f"all {len(parts)} partitions agree below the high watermark"


def wait_in_sync(cluster: Cluster, topic: str, timeout_s: float) -> tuple[list[Any], float]:
    """Partition states once every replica is in its ISR, or as they are at the timeout."""
    start = time.monotonic()
    states: list[Any] = []
    while True:
        try:
            states = admin.describe_topics(
                cluster.bootstrap_servers(), [topic], timeout_s=ADMIN_TIMEOUT_S
            )
        except admin.AdminError as e:
            log.debug("describe %s: %s", topic, e)
        if states and all(set(s.replicas) <= set(s.isr) for s in states):
            break
        if time.monotonic() - start > timeout_s:
            if not states:
                raise HarnessError(f"replica verification: cannot describe topic {topic}")
            break
        time.sleep(1.0)
    return sorted(states, key=lambda s: s.partition), round(time.monotonic() - start, 2)


def high_watermarks(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
    """Each partition's high watermark from its leader (None when it would not say)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-replica-verify",
            "enable.auto.commit": False,
            "logger": CLIENT_LOGGER,
        }
    )
    out: dict[int, int | None] = {}
    try:
        for p in partitions:
            try:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=ADMIN_TIMEOUT_S, cached=False
                )
                out[p] = high
            except Exception as e:
                log.warning("high watermark of %s-%d: %s", topic, p, e)
                out[p] = None
    finally:
        close_quietly(consumer, "close the replica verification's consumer")
    return out


def dump_node(
    cluster: Cluster, node: Node, topic: str, run_dir: Path, on_host: bool | None = None
) -> NodeDump:
    """Dump every segment of ``topic`` the node holds (live and copies), and find truncations.

    ``on_host``: run DumpLogSegments here on copies of the files rather than
    on the node; by default only for nodes much slower than the host (VMs
    under software emulation), where the tool itself takes minutes.
    """
    if on_host is None:
        on_host = node.is_slow_guest
    result = NodeDump(node)
    try:
        result.truncations = node_truncations(node, topic)
        result.corruptions = node_corruptions(node, topic)
        result.copy_watermarks = copy_watermarks(node, topic)
        files = _segment_files(node, topic)
        if not files:
            return result
        raw = Path(RAW_DIR, f"{node.name}-dump-log-segments.txt.gz")
        local = run_dir / raw
        local.parent.mkdir(parents=True, exist_ok=True)
        if on_host:
            host_dump.dump_on_host(cluster, node, files, local)
        else:
            result.unreadable = [
                {"node": node.name, "broker_id": node.node_id,
                 "partition": _partition_of(u["segment"]), **u}
                for u in dump_segments(cluster, node, topic, files, local)
            ]  # fmt: skip
        result.raw = raw.as_posix()
        with gzip.open(local, "rt", errors="replace") as lines:
            result.logs = parse_dump(lines)
    except HarnessError as e:
        result.error = str(e)
    return result


def node_truncations(node: Node, topic: str) -> list[dict[str, Any]]:
    """The broker's log truncations of ``topic``, from its server.log files."""
    logs = node.path("logs")
    found = node.run(
        f"grep -h -F {quote(topic)} {quote(logs)}/server.log* 2>/dev/null | grep -F Truncat; true",
        timeout=60,
    ).stdout.splitlines()
    return [
        {
            "node": node.name,
            "broker_id": node.node_id,
            "partition": t.partition,
            "offset": t.offset,
            "high_watermark": t.high_watermark,
            "time_ms": t.time_ms,
            "line": t.line,
        }
        for t in merge_truncations(truncations(found, topic))
    ]


def node_corruptions(node: Node, topic: str) -> list[dict[str, Any]]:
    """The damaged segments of ``topic`` the broker found on start, from its server.log files."""
    needles = " ".join(f"-e {quote(n)}" for n in CORRUPTION_NEEDLES)
    found = node.run(
        f"grep -h -F {needles} {quote(node.path('logs'))}/server.log* 2>/dev/null; true",
        timeout=60,
    ).stdout.splitlines()
    return [
        {"node": node.name, "broker_id": node.node_id, **asdict(c)}
        for c in corruptions(found, topic)
    ]


def copy_watermarks(node: Node, topic: str) -> dict[int, dict[int, int]]:
    """Per fault, the high watermarks the copied broker had checkpointed before it died."""
    out = node.run(
        f"for f in {quote(copies_dir(node))}/fault-*/{CHECKPOINT}; do "
        f'[ -f "$f" ] && echo "== $f" && cat "$f"; done; true',
        timeout=30,
    ).stdout
    found: dict[int, dict[int, int]] = {}
    for block in out.split("== ")[1:]:
        path, _, text = block.partition("\n")
        fault = path.rsplit("/fault-", 1)[-1].split("/", 1)[0]
        if fault.isdigit():
            found[int(fault)] = parse_checkpoint(text, topic)
    return found


def _segment_files(node: Node, topic: str) -> list[str]:
    data = node.path("data", "kafka")
    listing = node.run(
        f"ls -1 {quote(data)}/{quote(topic)}-*/*.log "
        f"{quote(copies_dir(node))}/*/{quote(topic)}-*/*.log 2>/dev/null; true",
        timeout=30,
    )
    return [f for f in listing.stdout.split() if f.endswith(".log")]


def _forget_copies(node: Node) -> None:
    try:
        node.run(f"rm -rf {quote(copies_dir(node))}", timeout=30, check=False)
    except HarnessError as e:
        log.warning("%s: removing log copies: %s", node.name, e)


def _partition_result(
    cluster: Cluster,
    topic: str,
    state: Any,
    high: dict[int, int | None],
    dumps: list[NodeDump],
) -> dict[str, Any]:
    p = state.partition
    hw = high.get(p)
    entry: dict[str, Any] = {
        "partition": p,
        "replicas": list(state.replicas),
        "leader": state.leader,
        "isr": list(state.isr),
        "in_sync": set(state.replicas) <= set(state.isr),
        "high_watermark": hw,
        "agree": None,
        "diverged": False,
        "error": None,
        "compared": [],
    }
    by_id = {d.node.node_id: d for d in dumps}
    live_dir = f"{topic}-{p}"
    leader_dump = by_id.get(state.leader)
    leader_log = _live_log(leader_dump, live_dir) if leader_dump else None
    if leader_log is None or hw is None:
        entry["error"] = _why_not_compared(leader_dump, hw)
        return entry
    held_now = {
        v
        for d in dumps
        for directory, replica in d.logs.items()
        if not directory.startswith(copies_dir(d.node))
        for v in replica.records.values()
    }
    live_agree = []
    for broker in state.replicas:
        dump = by_id.get(broker)
        if dump is None:
            continue
        replica = _live_log(dump, live_dir)
        compared = _compared(dump, "live", None, replica)
        compared["high_watermark"] = hw
        if replica is not None and broker != state.leader:
            compared.update(compare_follower(replica, leader_log, hw, broker in state.isr))
        elif broker == state.leader:
            compared["agree"] = True
        live_agree.append(compared["agree"])
        entry["compared"].append(compared)
    for dump in dumps:
        for directory, copy in sorted(dump.logs.items()):
            fault_id = _copy_fault(dump.node, directory, live_dir)
            if fault_id is None:
                continue
            compared = _compared(dump, "before-rejoin", fault_id, copy)
            committed = dump.copy_watermarks.get(fault_id, {}).get(p)
            compared["high_watermark"] = committed
            compared.update(compare_before_rejoin(copy, leader_log, held_now, committed).as_dict())
            entry["compared"].append(compared)
    twice = stored_twice(leader_log, hw)
    if twice:
        entry["stored_twice"] = twice
    entry["agree"] = None if None in live_agree else all(live_agree)
    entry["diverged"] = any(c["agree"] is False for c in entry["compared"])
    return entry


def _live_log(dump: NodeDump, live_dir: str) -> ReplicaLog | None:
    """The node's live copy of a partition (empty if it holds none); None if unread."""
    if dump.error is not None:
        return None
    directory = dump.node.path("data", "kafka", live_dir)
    return dump.logs.get(directory, ReplicaLog(directory))


def _why_not_compared(leader_dump: NodeDump | None, hw: int | None) -> str:
    if leader_dump is None:
        return "the partition has no leader"
    if leader_dump.error is not None:
        return f"the leader's log could not be read: {leader_dump.error}"
    return "the leader did not give its high watermark"


def _copy_fault(node: Node, directory: str, live_dir: str) -> int | None:
    """The fault id of a before-rejoin copy of this partition, else None."""
    prefix = copies_dir(node) + "/fault-"
    if not directory.startswith(prefix) or not directory.endswith("/" + live_dir):
        return None
    fault = directory[len(prefix) :].split("/", 1)[0]
    return int(fault) if fault.isdigit() else None


def _compared(dump: NodeDump, source: str, fault_id: int | None, replica: ReplicaLog | None):
    return {
        "node": dump.node.name,
        "broker_id": dump.node.node_id,
        "source": source,
        "fault_id": fault_id,
        "log_start": replica.log_start if replica else None,
        "log_end": replica.log_end if replica else None,
        "agree": None,
        "first_divergence": None,
        "diverged_offsets": 0,
        "diverged_ranges": [],
        "lost_values": 0,
        "uncommitted_offsets": 0,
        "high_watermark": None,
        "raw": dump.raw,
        "error": dump.error,
    }
