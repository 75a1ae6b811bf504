"""When a share-partition may have changed leader: the tenure boundaries of each partition.

Why: in Kafka 4.4 a share-partition leader keeps acquisitions in memory only;
it writes the share coordinator when records are acknowledged or released, when
a lock expires and when the start offset moves, and a new leader starts from
what was written (docs/results.md, "Share-group checks").  So after a leader
change a record may go out again with the same or a lower delivery count, and
the share checks must know where such changes may lie before calling two
deliveries one tenure's.

A *boundary* is an interval of the history's time axis (ns) inside which a
partition's share state may have been rebuilt.  The rule is conservative:
two events are separated by a leader change when any boundary interval could
lie between them, so a tenure is never assumed longer than the evidence shows.

Sources:

- ``cluster-state.jsonl`` beside the history (docs/history.md, "Cluster-state
  samples"): the sampler stamps ``time`` on the history's clock before it asks,
  so sample i shows the state at some moment in [t_i, t_i+1].  A change of the
  sampled leader (to or from no leader, or an unknown one when the sample failed
  or lacks the partition) between samples i-1 and i lies in [t_i-1, t_i+1]; a
  gap of more than ``GAP_NS`` between samples is a possible change too, and so
  is the time before the first sample and after the last.
- the fault lines: a kill or restart of a node that may have led the partition
  (the restarted broker lost its memory, even if it leads again) is a boundary
  over the fault's whole span.
- without samples of a partition, every fault that could move leadership or
  restart a broker is a possible change for it, from the fault's start until
  ``SETTLE_NS`` after its heal, and the finding says leadership was not recorded.

``checkers.share.share_checks`` joins these with the deliveries in Spark; the plain
twin (testkit/reference_share.py) computes them its own way.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_chaos.workloads import mirror_spec

NS = 1_000_000_000
# Samples are ~1 s apart; farther apart than this, a change and a change back
# could both fall between them unseen.
GAP_NS = int(2.5 * NS)
# Past the last sample: a sample's query can take up to two 3 s timeouts.
LAST_SLACK_NS = 7 * NS
# Kafka's default leader.imbalance.check.interval.seconds: a restarted broker may
# take its preferred leaderships back this long after a heal.
SETTLE_NS = 300 * NS
FOREVER = 1 << 62
# Faults that wipe a broker's memory when they hit it.
WIPING = {
    "kill": "killed",
    "restart": "restarted",
    "kill-all": "killed with every node",
    "rolling-restart": "restarted in a rolling restart",
    "hard-rolling-restart": "killed in a hard rolling restart",
    "unclean-election": "killed in an unclean election",
}
# Faults of the MirrorMaker node (the mirror workload's own) move no broker's leadership.
NOT_BROKER = mirror_spec.FAULTS
UNKNOWN = "unknown"  # a sample that failed, or did not list the partition
Key = tuple[str, int]  # topic, partition


@dataclass(frozen=True)
class Boundary:
    """An interval in which ``topic``/``partition`` may have changed share-partition leader.

    ``topic`` None: every partition of history ``hid`` whose leadership was not
    sampled (a fault, judged without samples).  ``hid`` None: any history (a
    sampled change, which its topic already names)."""

    hid: int | None
    topic: str | None
    partition: int | None
    start: int
    end: int
    why: str


@dataclass(frozen=True)
class Fault:
    hid: int
    f: str
    targets: tuple[str, ...]
    start: int
    end: int  # FOREVER when the end line is missing


def read_samples(path: Path | None) -> list[dict[str, Any]]:
    """The samples of ``cluster-state.jsonl`` in file order; a bad line is skipped."""
    if path is None or not Path(path).exists():
        return []
    out = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                sample = json.loads(line)
                int(sample["time"])
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(sample, dict):
                out.append(sample)
    return out


def faults_from_lines(lines: Iterable[dict[str, Any]]) -> list[Fault]:
    """Faults from nemesis lines (``hid``, ``f``, ``time``, ``value``), paired by id."""
    starts: dict[tuple[int, int], dict[str, Any]] = {}
    ends: dict[tuple[int, int], int] = {}
    for line in lines:
        v = line.get("value") or {}
        if not isinstance(v, dict) or "id" not in v or v.get("phase") not in ("start", "end"):
            continue
        key = (int(line.get("hid") or 0), int(v["id"]))
        if v["phase"] == "start":
            starts.setdefault(key, {**line, "value": v})
        else:
            ends.setdefault(key, int(line["time"]))
    return [
        Fault(hid, s["f"], tuple(str(t) for t in s["value"].get("targets") or ()),
              int(s["time"]), ends.get((hid, fid), FOREVER))
        for (hid, fid), s in sorted(starts.items(), key=lambda kv: kv[1]["time"])
    ]  # fmt: skip


def node_id(name: str) -> int | None:
    """Broker id of a node name ``nK``; None when the name does not say."""
    m = re.fullmatch(r"n(\d+)", name)
    return int(m.group(1)) if m else None


def _state(part: dict[str, Any] | None) -> int | str | None:
    """The sampled leader: a broker id, None (no leader) or UNKNOWN."""
    if part is None:
        return UNKNOWN
    leader = part.get("leader")
    if not isinstance(leader, int) or isinstance(leader, bool):
        return None
    return leader if leader >= 0 else None


def leader_name(state: int | str | None) -> str:
    if state is None:
        return "no leader"
    return UNKNOWN if state == UNKNOWN else f"n{state}"


def sequences(samples: list[dict[str, Any]]) -> dict[Key, list[tuple[int, int | str | None]]]:
    """Per sampled partition, (time, leader state) of every sample that concerns it.

    A sample concerns the topics it lists; a failed or empty one concerns every
    partition (in a run, the sampler asks about one topic)."""
    listed: dict[Key, None] = {}
    for s in samples:
        for p in s.get("partitions") or []:
            if isinstance(p, dict) and isinstance(p.get("partition"), int):
                listed[(str(p.get("topic")), p["partition"])] = None
    out: dict[Key, list[tuple[int, int | str | None]]] = defaultdict(list)
    for s in samples:
        t = int(s["time"])
        parts = [p for p in s.get("partitions") or [] if isinstance(p, dict)]
        if s.get("error") or not parts:
            for key in listed:
                out[key].append((t, UNKNOWN))
            continue
        here = {(str(p.get("topic")), p.get("partition")): p for p in parts}
        topics = {k[0] for k in here}
        for key in listed:
            if key[0] in topics:
                out[key].append((t, _state(here.get(key))))
    return dict(out)


def _s(ns: int) -> str:
    return f"{ns / NS:.1f} s"


def sampled_boundaries(seqs: dict[Key, list[tuple[int, int | str | None]]]) -> list[Boundary]:
    """Boundaries from the sampled leadership alone (see the module's text)."""
    out = []
    for (topic, part), seq in seqs.items():
        where = f"{topic}/{part}"
        times = [t for t, _ in seq]
        later = times[1:2] or [times[0] + LAST_SLACK_NS]
        before = f"leadership of {where} not sampled before {_s(times[0])}"
        out.append(Boundary(None, topic, part, -FOREVER, later[0], before))
        for i in range(1, len(seq)):
            (t0, a), (t1, b) = seq[i - 1], seq[i]
            end = times[i + 1] if i + 1 < len(seq) else t1 + LAST_SLACK_NS
            if a != b:
                why = (f"leader of {where} moved {leader_name(a)} -> {leader_name(b)} "
                       f"between {_s(t0)} and {_s(t1)}")  # fmt: skip
            elif t1 - t0 > GAP_NS:
                why = f"leadership of {where} not sampled between {_s(t0)} and {_s(t1)}"
            else:
                continue
            out.append(Boundary(None, topic, part, t0, end, why))
        after = f"leadership of {where} not sampled after {_s(times[-1])}"
        out.append(Boundary(None, topic, part, times[-1], FOREVER, after))
    return out


def _may_lead(seq: list[tuple[int, int | str | None]], node: int | None, f: Fault) -> bool:
    """Whether ``node`` may have led the partition at some moment of ``f``'s span."""
    if node is None or f.start < seq[0][0]:
        return True
    for i, (t, state) in enumerate(seq):
        until = seq[i + 1][0] if i + 1 < len(seq) else FOREVER
        if t <= f.end and until >= f.start and state in (node, UNKNOWN):
            return True
    return False


def fault_boundaries(
    faults: list[Fault], seqs: dict[Key, list[tuple[int, int | str | None]]]
) -> list[Boundary]:
    """Kills and restarts of a (possible) leader of a sampled partition, and, for
    partitions never sampled, every broker fault of their history."""
    out = []
    for f in faults:
        if f.f in WIPING:
            for (topic, part), seq in seqs.items():
                hit = [n for n in f.targets if _may_lead(seq, node_id(n), f)]
                if hit:
                    why = f"{hit[0]}, its leader, was {WIPING[f.f]} at {_s(f.start)}"
                    out.append(Boundary(f.hid, topic, part, f.start, f.end, why))
        if f.f not in NOT_BROKER:
            end = f.end if f.end >= FOREVER else f.end + SETTLE_NS
            why = (f"{f.f} of {', '.join(f.targets) or 'the cluster'} at {_s(f.start)} "
                   "(leadership of this partition was not recorded)")  # fmt: skip
            out.append(Boundary(f.hid, None, None, f.start, end, why))
    return out


def boundaries(
    samples: list[dict[str, Any]], faults: list[Fault]
) -> tuple[list[Boundary], set[Key]]:
    """Every boundary, and the partitions whose leadership was sampled (the
    boundaries with ``topic`` None apply to the others only)."""
    seqs = sequences(samples)
    return sampled_boundaries(seqs) + fault_boundaries(faults, seqs), set(seqs)
