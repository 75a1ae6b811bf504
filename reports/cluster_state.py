"""Leader/ISR segments per partition, streamed from cluster-state.jsonl.

Consecutive samples with the same leader and ISR collapse into one segment,
so a long run stays a handful of rectangles per partition in the report.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

from kafka_chaos.reports.svg import Segment

NS = 1_000_000_000


@dataclass
class ClusterTimeline:
    partitions: dict[tuple[str, int], list[Segment]] = field(default_factory=dict)
    samples: int = 0
    errors: int = 0  # samples where the admin query failed
    under_replicated_samples: int = 0
    leaderless_samples: int = 0
    controllers: list[int] = field(default_factory=list)  # distinct, in order seen
    end_s: float = 0.0
    problems: list[str] = field(default_factory=list)

    def rows(self) -> list[tuple[str, list[Segment]]]:
        """Labelled by partition number alone when there is one topic (names can be long)."""
        one_topic = len({t for t, _ in self.partitions}) == 1
        return [
            (f"p{p}" if one_topic else f"{t}/{p}", segs)
            for (t, p), segs in sorted(self.partitions.items())
        ]

    def summary(self) -> list[dict[str, object]]:
        """Per partition: leader changes and how long it was under-replicated or leaderless."""
        out = []
        for label, segs in self.rows():
            leaders = [s.leader for s in segs]
            out.append(
                {
                    "partition": label,
                    "leader_changes": sum(1 for a, b in itertools.pairwise(leaders) if a != b),
                    "under_replicated_s": sum(s.end - s.start for s in segs if s.under_replicated),
                    "leaderless_s": sum(
                        s.end - s.start for s in segs if s.leader is None or s.leader < 0
                    ),
                    "min_isr": min((len(s.isr) for s in segs), default=0),
                    "replicas": max((len(s.replicas) for s in segs), default=0),
                }
            )
        return out

    @property
    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.partitions})


def _ints(xs: object) -> list[int]:
    return [x for x in xs if isinstance(x, int)] if isinstance(xs, list) else []


def read_cluster_state(path: Path) -> ClusterTimeline:
    """Build segments; a bad line is noted and skipped (samples are best-effort).

    Under-replication means ISR smaller than the replica set.
    """
    out = ClusterTimeline()
    last_time = 0.0
    # samples are best-effort evidence: undecodable bytes become a skipped line, not a crash
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
                t = float(sample["time"]) / NS
            except (ValueError, KeyError, TypeError) as e:
                if len(out.problems) < 5:
                    out.problems.append(f"line {lineno}: skipped ({type(e).__name__})")
                continue
            out.samples += 1
            last_time = max(last_time, t)
            if sample.get("error"):
                out.errors += 1
            ctrl = sample.get("controller")
            if isinstance(ctrl, int) and (not out.controllers or out.controllers[-1] != ctrl):
                out.controllers.append(ctrl)
            for part in sample.get("partitions") or []:
                _add(out, part, t)
    out.end_s = last_time
    for segs in out.partitions.values():
        if segs:
            segs[-1].end = max(segs[-1].end, last_time)
    return out


def _add(out: ClusterTimeline, part: dict, t: float) -> None:
    if not isinstance(part, dict):
        return
    key = (
        str(part.get("topic")),
        part.get("partition") if isinstance(part.get("partition"), int) else -1,
    )
    leader = part.get("leader") if isinstance(part.get("leader"), int) else None
    isr, replicas = _ints(part.get("isr")), _ints(part.get("replicas"))
    if len(isr) < len(replicas):
        out.under_replicated_samples += 1
    if leader is None or leader < 0:
        out.leaderless_samples += 1
    segs = out.partitions.setdefault(key, [])
    if segs:
        segs[-1].end = t
        last = segs[-1]
        if (
            last.leader == leader
            and sorted(last.isr) == sorted(isr)
            and sorted(last.replicas) == sorted(replicas)
        ):
            return
    segs.append(Segment(t, t, leader, isr, replicas))
