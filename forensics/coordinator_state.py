"""After the heal: what the coordinators persisted for the run's groups, decoded.

Clients say what they saw; a finding about groups is only explained by what
the broker held.  Kafka's coordinators keep that in internal topics:
``__consumer_offsets`` (a group's offset commits and membership) and
``__share_group_state`` (each share-partition's start offset and in-flight
batches, with their states and delivery counts, KIP-932).  Every write to
them is a record with its time, so their logs are the state over time, not
a sample of it.

This step finds the partitions of those topics the run's groups hash to,
decodes them with Kafka's own DumpLogSegments (``--offsets-decoder``,
``--share-group-state-decoder``) on their leader, keeps the run's records
under ``coordinators/`` and writes ``coordinators.json``: per partition of
the run's topic, how many state writes the broker made and the last state
it persisted, and every place a persisted position went backwards (the
symptom of out-of-order state writes, apache/kafka#23074).

Only for runs whose findings need it (share groups, coordinator-targeted
faults): it costs a JVM per leader.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from shlex import quote
from typing import Any

from kafka_chaos.harness import admin, kafka_db
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.fan_out import on_nodes
from kafka_chaos.harness.history import wall_clock_on_history_axis
from kafka_chaos.harness.node import Node
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.nemeses.targeting import (
    OFFSETS,
    SHARE_STATE,
    coordinator_partition,
    share_partition_key,
)
from kafka_chaos.workloads import registry

log = logging.getLogger(__name__)

RESULT = "coordinators.json"
RAW_DIR = "coordinators"
SHARE_TIMELINE = "share-state.jsonl"
ADMIN_TIMEOUT_S = 10.0
DUMP_TIMEOUT_S = 300.0
COORDINATOR_TARGETS = ("group-coordinator", "share-coordinator")
DECODER = {OFFSETS: "--offsets-decoder", SHARE_STATE: "--share-group-state-decoder"}


def wanted(spec: TestSpec) -> bool:
    """Runs whose findings the coordinators' state explains."""
    return registry.declared(spec.workload).group is not None and (
        spec.consumer.mode == "share" or spec.nemesis.targets in COORDINATOR_TARGETS
    )


def keep(
    cluster: Cluster, spec: TestSpec, run_dir: Path, clock_ns: Callable[[], int] | None = None
) -> dict[str, Any]:
    """Dump, keep and summarise the coordinators' records of the run's groups."""
    run_dir = Path(run_dir)
    on_history_axis = wall_clock_on_history_axis(clock_ns)
    share = spec.consumer.mode == "share"
    topic = SHARE_STATE if share else OFFSETS
    group = registry.declared(spec.workload).group
    groups = [group(spec, k) for k in range(spec.consumer.groups)] if group else []
    result: dict[str, Any] = {"state_topic": topic, "groups": groups, "error": None}
    try:
        bootstrap = cluster.bootstrap_servers()
        states = admin.describe_topics(bootstrap, [topic], timeout_s=ADMIN_TIMEOUT_S)
        count = len([s for s in states if s.topic == topic])
        if not count:
            raise HarnessError(f"{topic} does not exist")
        if share:
            tid = admin.topic_id(bootstrap, spec.topic.name, timeout_s=ADMIN_TIMEOUT_S)
            keys = [
                share_partition_key(g, tid, p) for g in groups for p in range(spec.topic.partitions)
            ]
        else:
            keys = groups
        partitions = sorted({coordinator_partition(k, count) for k in keys})
        leaders = {s.partition: s.leader for s in states if s.topic == topic}
        by_node: dict[int, list[int]] = {}
        for p in partitions:
            if leaders.get(p) is not None and leaders[p] >= 0:
                by_node.setdefault(leaders[p], []).append(p)
        result["partitions"] = {str(p): leaders.get(p) for p in partitions}
        nodes = [cluster.node(n) for n in by_node]
        dumped = on_nodes(
            nodes,
            lambda n: _dump(cluster, n, topic, by_node[n.node_id], groups, run_dir),
            timeout_s=DUMP_TIMEOUT_S + 60,
            what=f"dumping {topic}",
        )
        records: list[dict[str, Any]] = []
        for outcome in dumped:
            if outcome.error is not None:
                raise HarnessError(f"{outcome.node.name}: {outcome.error}")
            records += outcome.value or []
        if on_history_axis is not None:  # brokers stamp wall-clock time
            for r in records:
                r["history_s"] = on_history_axis(r["time_ms"])
        result["raw"] = sorted(f"{RAW_DIR}/{n.name}-{topic}.txt.gz" for n in nodes)
        if share:
            _write_lines(run_dir / SHARE_TIMELINE, records)
            result["share_partitions"] = share_summary(records)
        else:
            result["commits"] = commit_summary(records)
    except HarnessError as e:
        result["error"] = str(e)
    except Exception as e:  # evidence is worth having, never worth the run's history
        log.exception("keeping the coordinators' state failed")
        result["error"] = f"{type(e).__name__}: {e}"
    (run_dir / RESULT).write_text(json.dumps(result, indent=1) + "\n")
    log.info("coordinators: %s", summary(result))
    return result


def _dump(
    cluster: Cluster,
    node: Node,
    topic: str,
    partitions: list[int],
    groups: list[str],
    run_dir: Path,
) -> list[dict[str, Any]]:
    """Decode ``partitions`` of ``topic`` on ``node``; keep the lines of ``groups``."""
    data = node.path("data", "kafka")
    globs = " ".join(f"{quote(f'{data}/{topic}-{p}')}/*.log" for p in partitions)
    files = node.run(f"ls -1 {globs} 2>/dev/null; true", timeout=30)
    segments = [f for f in files.stdout.split() if f.endswith(".log")]
    local = run_dir / RAW_DIR / f"{node.name}-{topic}.txt.gz"
    local.parent.mkdir(parents=True, exist_ok=True)
    if not segments:
        with gzip.open(local, "wt") as f:
            f.write("")
        return []
    tool = kafka_db.tool_command(
        cluster,
        node,
        kafka_db.dump_log_segments_class(cluster.kafka_version),
        ["--files", ",".join(segments), DECODER[topic]],
    )
    keep_lines = " ".join(f"-e {quote(g)}" for g in ("Dumping ", *groups))
    remote = node.path("run", f"coordinator-dump-{topic}.txt.gz")
    try:
        node.run(
            f"set -o pipefail; {tool} | grep -F {keep_lines} | gzip -1 > {quote(remote)}",
            timeout=DUMP_TIMEOUT_S,
        )
        node.get(remote, local)
    finally:
        node.run(f"rm -f {quote(remote)}", timeout=30, check=False)
    with gzip.open(local, "rt", errors="replace") as lines:
        return [dict(r, node=node.name) for r in parse(lines)]


def parse(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """DumpLogSegments' decoded records: ``| offset: N CreateTime: T ... key: {..} payload: {..}``.

    Yields {segment, offset, time_ms, key, value} (``value`` None for a tombstone)."""
    segment = None
    for line in lines:
        if line.startswith("Dumping "):
            segment = line.split()[1]
            continue
        if not line.startswith("| offset: ") or " key: " not in line:
            continue
        head, _, rest = line.partition(" key: ")
        key_text, _, payload = rest.partition(" payload: ")
        fields = head.split()
        try:
            record = {
                "segment": segment,
                "offset": int(fields[2]),
                "time_ms": int(fields[fields.index("CreateTime:") + 1]),
                "key": json.loads(key_text),
                "value": None if payload.strip() in ("", "<DELETE>") else json.loads(payload),
            }
        except (ValueError, IndexError, json.JSONDecodeError):
            continue  # a line of another shape: kept raw, not summarised
        yield record


def _write_lines(path: Path, records: list[dict[str, Any]]) -> None:
    with open(path, "w") as f:
        for r in sorted(records, key=lambda r: (r["time_ms"], r["offset"])):
            f.write(json.dumps(share_row(r)) + "\n")


def share_row(r: dict[str, Any]) -> dict[str, Any]:
    """One persisted share-partition state write, flattened for readers.

    ``kind``: ``snapshot`` (the whole state, key type 0) or ``update`` (a
    delta, type 1); ``batches`` [first, last, state, delivery count], states
    as Kafka numbers them (0 available, 2 acknowledged, 4 archived)."""
    data, value = r["key"].get("data", {}), (r["value"] or {}).get("data", {})
    return {
        "node": r["node"],
        "offset": r["offset"],
        "time_ms": r["time_ms"],
        "history_s": r.get("history_s"),
        "kind": {"0": "snapshot", "1": "update"}.get(str(r["key"].get("type")), "other"),
        "group": data.get("groupId"),
        "topic_id": data.get("topicId"),
        "partition": data.get("partition"),
        "start_offset": value.get("startOffset"),
        "state_epoch": value.get("stateEpoch"),
        "leader_epoch": value.get("leaderEpoch"),
        "batches": [
            [
                b.get("firstOffset"),
                b.get("lastOffset"),
                b.get("deliveryState"),
                b.get("deliveryCount"),
            ]
            for b in value.get("stateBatches", [])
        ],
        "deleted": r["value"] is None,
    }


class ShareState:
    """One share-partition's persisted state, folded from its writes in log order.

    A snapshot replaces everything; an update moves the start offset (unless
    -1) and overwrites the offsets its batches cover; offsets below the start
    offset are no longer tracked.  ``ranges()`` gives the in-flight offsets as
    [first, last, state, delivery count] runs, as a snapshot lists them.
    """

    def __init__(self) -> None:
        self.start: int | None = None
        self.epoch: int | None = None
        self.offsets: dict[int, tuple[int, int]] = {}

    def apply(self, row: dict[str, Any]) -> None:
        if row["kind"] == "snapshot":
            self.offsets, self.epoch = {}, row["state_epoch"]
        if row["start_offset"] is not None and row["start_offset"] >= 0:
            self.start = row["start_offset"]
        for first, last, state, count in row["batches"]:
            for o in range(first, last + 1):
                self.offsets[o] = (state, count)
        if self.start is not None:
            self.offsets = {o: v for o, v in self.offsets.items() if o >= self.start}

    def ranges(self) -> list[list[int]]:
        out: list[list[int]] = []
        for o in sorted(self.offsets):
            state, count = self.offsets[o]
            if out and out[-1][1] == o - 1 and out[-1][2:] == [state, count]:
                out[-1][1] = o
            else:
                out.append([o, o, state, count])
        return out


def state_at(rows: list[dict[str, Any]], history_s: float | None = None) -> ShareState:
    """The persisted state of one share-partition as of ``history_s`` (default: the end),
    from its ``share-state.jsonl`` rows."""
    state = ShareState()
    for row in sorted(rows, key=lambda r: r["offset"]):
        if history_s is None or row["history_s"] is None or row["history_s"] <= history_s:
            state.apply(row)
    return state


def offset_story(rows: list[dict[str, Any]], offset: int) -> list[dict[str, Any]]:
    """Every persisted write of one share-partition (its ``rows``) that changed what
    one record's state was: (history_s, kind, start_offset, state, delivery count),
    state None when the write left the offset untracked (below the start offset,
    or never written).

    The answer to "what did the broker hold for this record, and when"."""
    state, story, last = ShareState(), [], None
    for row in sorted(rows, key=lambda r: r["offset"]):
        state.apply(row)
        held = state.offsets.get(offset)
        now = (state.start, held)
        if now != last:
            story.append(
                {"history_s": row["history_s"], "kind": row["kind"], "start_offset": state.start,
                 "state": None if held is None else held[0],
                 "delivery_count": None if held is None else held[1]}
            )  # fmt: skip
            last = now
    return story


def share_summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per share-partition: its writes, its last persisted state (folded), and where
    the persisted start offset went backwards within one state epoch."""
    rows = [share_row(r) for r in sorted(records, key=lambda r: r["offset"])]
    out = []
    keys = {(r["group"], r["topic_id"], r["partition"]) for r in rows}
    for key in sorted(keys, key=lambda k: (str(k[0]), str(k[1]), k[2] if k[2] is not None else -1)):
        mine = [r for r in rows if (r["group"], r["topic_id"], r["partition"]) == key]
        state, backwards = ShareState(), []
        for r in mine:
            before = (state.start, state.epoch)
            state.apply(r)
            went_back = (
                before[0] is not None and state.start is not None and state.start < before[0]
            )
            if went_back and state.epoch == before[1]:
                backwards.append(
                    {"offset": r["offset"], "from": before[0], "to": state.start,
                     "history_s": r["history_s"]}
                )  # fmt: skip
        out.append(
            {
                "group": key[0],
                "topic_id": key[1],
                "partition": key[2],
                "writes": len(mine),
                "snapshots": sum(r["kind"] == "snapshot" for r in mine),
                "last_write_s": mine[-1]["history_s"],
                "start_offset": state.start,
                "state_epoch": state.epoch,
                "in_flight": state.ranges(),
                "start_offset_backwards": backwards,
            }
        )
    return out


def commit_summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per group and partition of the run: commit records the coordinator wrote,
    the last committed offset, and every commit record below the one before it."""
    commits: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in sorted(records, key=lambda r: r["offset"]):
        if str(r["key"].get("type")) != "1":  # type 1: an offset commit (2: group metadata)
            continue
        k = r["key"]["data"]
        value = (r["value"] or {}).get("data", {})
        commits.setdefault((k["group"], k["topic"], k["partition"]), []).append(
            {
                "offset": r["offset"],
                "committed": value.get("offset"),
                "history_s": r.get("history_s"),
            }
        )
    out = []
    for (group, topic, partition), rows in sorted(commits.items()):
        lower = [
            {"log_offset": b["offset"], "from": a["committed"], "to": b["committed"],
             "history_s": b["history_s"]}
            for a, b in zip(rows, rows[1:], strict=False)
            if a["committed"] is not None and b["committed"] is not None
            and b["committed"] < a["committed"]
        ]  # fmt: skip
        out.append(
            {
                "group": group,
                "topic": topic,
                "partition": partition,
                "commit_records": len(rows),
                "last_committed": rows[-1]["committed"],
                "went_lower": lower,
            }
        )
    return out


def summary(result: dict[str, Any]) -> str:
    """One line for the harness log."""
    if result.get("error"):
        return f"not kept: {result['error']}"
    if "share_partitions" in result:
        parts = result["share_partitions"]
        back = sum(len(p["start_offset_backwards"]) for p in parts)
        writes = sum(p["writes"] for p in parts)
        return (
            f"{writes} share-state writes for {len(parts)} share-partitions; "
            f"start offset went backwards {back} times"
        )
    parts = result.get("commits", [])
    lower = sum(len(p["went_lower"]) for p in parts)
    records = sum(p["commit_records"] for p in parts)
    return (
        f"{records} offset commit records for {len(parts)} partitions; {lower} below the one before"
    )
