"""Notice a share-partition that stopped delivering, while it lasts, and probe it.

Why: a share-partition that never delivers again (evidence/share-partitions-
stuck-after-*) leaves only its effects in the history, and after the run the
share-partition leader's in-memory state is gone.  Who held it, what a fresh
member is given, and which broker led it can only be asked while it is stuck.
So during a share-group run a thread reads the history as it is written and,
when a partition has records to hand out but hands none out, runs one bounded
probe (workloads/java/share_probe.py) and writes what it saw to
``share-probes.jsonl`` (docs/coordinators.md, "Probing a stall").

A stall here: a partition of a group's topic with acknowledged sends beyond the
highest offset the group was ever delivered, none of its records delivered to
any member for ``lock_ms`` + ``STALL_MARGIN_S`` (counted from its last delivery,
or from the first of those sends' acknowledgements if that is later), while the
group's other partitions did deliver within the last lock duration.  The margin:
a member that crashes holding records keeps them for one lock, and a partition
behind such locks is normal for that long.  The last condition leaves out the
moments nobody consumes (between the workload and the share drain, a fault that
stops every partition), which say nothing about one partition.

The deliveries and acknowledged sends come from the history file itself, read
incrementally from where the last read stopped: the one record every client
writes, whatever its library, and already on disk (no second copy in memory, no
hook in the clients' hot paths).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.kafka_names import share_group_name

log = logging.getLogger(__name__)

PROBES_FILE = "share-probes.jsonl"
STALL_MARGIN_S = 3.0
REPORT_AGAIN_S = 30.0
CHECK_EVERY_S = 1.0
MAX_PROBES = 3  # per run: each costs a JVM for up to ~30 s on two shared cores
_SEND_OK = b'"type":"ok","f":"send"'
_POLL_OK = b'"type":"ok","f":"share-poll"'


@dataclass
class _Partition:
    """One (group, partition): what the group was delivered of it."""

    last_delivery_s: float | None = None
    max_delivered: int = -1
    pending_from: int = 0  # index into the partition's acked sends: first beyond max_delivered
    stalled_since: float | None = None  # set while a reported stall lasts
    stall_id: int | None = None
    reported_s: float = 0.0  # when it was last reported
    reports: int = 0


@dataclass
class Stall:
    """A partition found stalled: what the detector knew when it said so."""

    group: str
    partition: int
    since_s: float  # history seconds: the later of its last delivery and first pending ack
    last_delivery_s: float | None
    max_delivered: int
    acked_beyond: int  # acknowledged sends above max_delivered
    first_pending_offset: int
    last_acked_offset: int
    repeat: int = 0  # the stall was reported this many times before, and still lasts


@dataclass
class StallDetector:
    """Stalls from the history's send and share-poll completions (pure: fed lines, asked
    with a time), so it can be tested on generated sequences."""

    lock_s: float
    margin_s: float = STALL_MARGIN_S
    # A stall still open this long after its last report is reported again: a later
    # probe (the share drain's fresh members in the group by then) may be assigned it.
    again_s: float = REPORT_AGAIN_S
    acked: dict[int, list[tuple[int, float]]] = field(default_factory=dict)  # p -> (offset, s)
    parts: dict[tuple[str, int], _Partition] = field(default_factory=dict)
    group_last: dict[str, float] = field(default_factory=dict)  # group -> its last delivery
    group_start: dict[str, float] = field(default_factory=dict)  # its first delivery
    resumed: list[tuple[str, int, float, int | None]] = field(default_factory=list)
    topic: str | None = None

    def feed(self, op: dict[str, Any]) -> None:
        """One history line (only ok sends and ok share-polls matter)."""
        at = op["time"] / 1e9
        v = op.get("value") or {}
        if op["f"] == "send" and op["type"] == "ok" and "partition" in v:
            if self.topic is not None and v.get("topic") != self.topic:
                return
            self.acked.setdefault(v["partition"], []).append((v["offset"], at))
        elif op["f"] == "share-poll" and op["type"] == "ok":
            group = v.get("group")
            for r in v.get("records", []):
                if self.topic is not None and r.get("topic") != self.topic:
                    continue
                st = self.parts.setdefault((group, r["partition"]), _Partition())
                st.last_delivery_s = at
                st.max_delivered = max(st.max_delivered, r["offset"])
                self.group_last[group] = at
                self.group_start.setdefault(group, at)
                if st.stalled_since is not None:
                    self.resumed.append((group, r["partition"], at, st.stall_id))
                    st.stalled_since, st.stall_id, st.reports = None, None, 0

    def stalls(self, now_s: float) -> list[Stall]:
        """Partitions stalled at ``now_s`` not reported yet, or reported ``again_s`` ago
        and still stalled (``repeat`` counts the reports before)."""
        found = []
        for group, start in self.group_start.items():
            if now_s - self.group_last.get(group, start) > self.lock_s:
                continue  # the whole group is quiet: nobody consumes, nothing to tell
            for p, sends in self.acked.items():
                st = self.parts.setdefault((group, p), _Partition())
                if st.stalled_since is not None and now_s - st.reported_s < self.again_s:
                    continue
                while (
                    st.pending_from < len(sends) and sends[st.pending_from][0] <= st.max_delivered
                ):
                    st.pending_from += 1
                beyond = [o for o, _ in sends[st.pending_from :] if o > st.max_delivered]
                if not beyond:
                    continue
                first_ack = sends[st.pending_from][1]
                since = max(
                    first_ack, st.last_delivery_s if st.last_delivery_s is not None else start
                )
                if st.stalled_since is None and now_s - since < self.lock_s + self.margin_s:
                    continue
                st.stalled_since = st.stalled_since if st.stalled_since is not None else since
                st.reported_s, st.reports = now_s, st.reports + 1
                found.append(
                    Stall(group, p, round(st.stalled_since, 3),
                          None if st.last_delivery_s is None else round(st.last_delivery_s, 3),
                          st.max_delivered, len(beyond), min(beyond), max(beyond),
                          st.reports - 1)
                )  # fmt: skip
        return found

    def mark(self, stall: Stall, stall_id: int) -> None:
        """Tie a reported stall to the probe line that recorded it (its resumption names it)."""
        self.parts[(stall.group, stall.partition)].stall_id = stall_id

    def still_stalled(self) -> list[tuple[str, int, float]]:
        return [
            (g, p, st.stalled_since)
            for (g, p), st in sorted(self.parts.items(), key=lambda kv: (str(kv[0][0]), kv[0][1]))
            if st.stalled_since is not None
        ]


class HistoryTail:
    """The history's new complete lines since the last call (only the kinds the detector
    reads are parsed: a line is tested for its bytes before it is decoded)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        data, self._partial = self._partial + data, b""
        lines = data.split(b"\n")
        self._partial = lines.pop()  # b"" after a complete last line
        return [orjson.loads(line) for line in lines if _SEND_OK in line or _POLL_OK in line]


# A probe: (stalls, probe number, history seconds now) -> the probe's record.
ProbeFn = Callable[[list[Stall], int, float], dict[str, Any]]


class StallWatch:
    """The thread: read the history every second, probe new stalls, write share-probes.jsonl.

    Bounded: one probe at a time, at most ``max_probes`` per run, each bounded by
    the probe itself (share_probe.PROBE_TIMEOUT_S); ``stop`` waits for a probe
    under way at most that long.  A probe that fails is recorded as such.
    """

    def __init__(
        self,
        history: HistoryWriter,
        run_dir: Path,
        lock_ms: int,
        topic: str,
        probe: ProbeFn,
        max_probes: int = MAX_PROBES,
        check_every_s: float = CHECK_EVERY_S,
        child: Any = None,
    ) -> None:
        self.history = history
        self.out = Path(run_dir) / PROBES_FILE
        self.detector = StallDetector(lock_ms / 1000, topic=topic)
        self.tail = HistoryTail(history.path)
        self.probe = probe
        self.max_probes = max_probes
        self.check_every_s = check_every_s
        self.probes = 0
        self.child = child  # started with the watch, so its JVM is up before a stall
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="share-stall-watch", daemon=True)

    def start(self) -> None:
        if self.child is not None:
            self.child.start()
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        """Stop watching; record the stalls still open and the stalls that ended."""
        self._stop.set()
        self._thread.join(timeout_s)
        if self.child is not None:
            self.child.stop()
        if self._thread.is_alive():
            log.warning("share stall watch still probing after %.0f s; left behind", timeout_s)
            return
        self._catch_up()
        now = self.history.elapsed_ns() / 1e9
        open_ = self.detector.still_stalled()
        self._write({"kind": "end", "at_s": round(now, 3), "probes": self.probes,
                     "still_stalled": [{"group": g, "partition": p, "since_s": round(s, 3)}
                                       for g, p, s in open_]})  # fmt: skip

    def _write(self, line: dict[str, Any]) -> None:
        with self._lock, open(self.out, "a") as f:
            f.write(json.dumps(line, sort_keys=True) + "\n")

    def _catch_up(self) -> None:
        for op in self.tail.read():
            self.detector.feed(op)
        for group, p, at, stall_id in self.detector.resumed:
            self._write({"kind": "resumed", "group": group, "partition": p,
                         "at_s": round(at, 3), "probe": stall_id})  # fmt: skip
        self.detector.resumed.clear()

    def _loop(self) -> None:
        while not self._stop.wait(self.check_every_s):
            try:
                # "now" before the read: a line written while a long backlog is parsed
                # (after a probe) is then never missing from what "now" judges
                now = self.history.elapsed_ns() / 1e9
                self._catch_up()
                stalls = self.detector.stalls(now)
                if not stalls:
                    continue
                if self.probes >= self.max_probes:
                    self._write({"kind": "stall", "at_s": round(now, 3), "probed": False,
                                 "why": f"the run's {self.max_probes} probes are used",
                                 "stalls": [s.__dict__ for s in stalls]})  # fmt: skip
                    continue
                self.probes += 1
                for s in stalls:
                    self.detector.mark(s, self.probes)
                log.warning(
                    "share stall: %s; probing (%d of at most %d)",
                    ", ".join(f"{s.group} partition {s.partition} since {s.since_s:.1f} s"
                              for s in stalls),
                    self.probes, self.max_probes,
                )  # fmt: skip
                wall_ms = int(time.time() * 1000)  # for the logs' stamps (forensics.probe_logs)
                record = self.probe(stalls, self.probes, now)
                self._write({"kind": "probe", "probe": self.probes, "at_s": round(now, 3),
                             "wall_ms": wall_ms,
                             "stalls": [s.__dict__ for s in stalls], **record})  # fmt: skip
            except Exception:  # the watch must never take the run down
                log.exception("share stall watch")


def for_run(
    spec: Any,
    bootstrap: str,
    history: HistoryWriter,
    run_dir: Path,
    processes: Any,
) -> StallWatch | None:
    """The run's stall watch, or None: only share-group runs with ``consumer.share_probe``.

    Each probe's member is a process of its own (a number from the workload's
    counter, so it never collides with a member's) in the stalled group.
    """
    c = spec.consumer
    if c.mode != "share" or not getattr(c, "share_probe", False):
        return None
    from kafka_chaos.workloads.java.share_probe import ProbeProcess

    child = ProbeProcess(
        spec.cluster.kafka_version,
        Path(run_dir) / "share-probes",
        bootstrap,
        dataclasses.asdict(spec.debug) if hasattr(spec, "debug") else None,
        (share_group_name(spec, 0), [f"{spec.name}-probe{n}" for n in range(1, MAX_PROBES + 1)]),
    )

    def probe(stalls: list[Stall], n: int, now_s: float) -> dict[str, Any]:
        group = stalls[0].group  # one group per probe: the first stalled one's
        settings = {
            "group": group,
            "topic": spec.topic.name,
            "partitions": spec.topic.partitions,
            "client_id": f"{spec.name}-probe{n}",
            "lock_ms": c.share_lock_ms,
            "delivery_limit": c.share_delivery_limit,
        }
        return child.run(history, processes.next(), settings, again=n < MAX_PROBES)

    return StallWatch(history, run_dir, c.share_lock_ms, spec.topic.name, probe, child=child)
