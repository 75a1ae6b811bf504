"""Rebalance availability under faults: the classic group protocol against KIP-848.

Runs the consumer-failover preset (one group of three members, one crashing
every 12 s) with leader kills added, N times per protocol on one Kafka 4.4
cluster, and measures from each history's rebalance and crash lines:

- the longest time a partition had no owner, once the group first covered
  every partition (a crash ends its member's ownership at once);
- per crash, the time until every partition was owned again (full coverage).

    python bench/rebalance_availability.py --runs 3

Both protocols run alternately on the same cluster, so the two columns of a
row see the same machine load.  Runs go to ``store-bench/``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from kafka_chaos.harness.backends import destroy_cluster
from kafka_chaos.harness.spec import NEWEST_KAFKA

from kafka_chaos.options import build_spec
from kafka_chaos.run import run_test
from kafka_chaos.scenarios import scenario_layer

NS = 1_000_000_000
PROTOCOLS = {"classic": "consumer-failover", "consumer": "consumer-failover-kip848"}
FAULTS = {"faults": ["kill"], "targets": "leader", "interval_s": 10.0, "duration_s": 8.0}


@dataclass
class Coverage:
    """Who owns which partition of one group, replayed line by line."""

    partitions: set[int]
    owners: dict[int, set[int]] = field(default_factory=dict)  # partition -> processes
    unowned_since: dict[int, int] = field(default_factory=dict)  # partition -> time
    covered_once: bool = False
    longest_gap_ns: int = 0

    def _update(self, now: int) -> None:
        for p in self.partitions:
            owned = bool(self.owners.get(p))
            if owned and p in self.unowned_since:
                if self.covered_once:
                    self.longest_gap_ns = max(self.longest_gap_ns, now - self.unowned_since[p])
                del self.unowned_since[p]
            elif not owned and p not in self.unowned_since:
                self.unowned_since[p] = now
        if not self.unowned_since:
            self.covered_once = True

    def assign(self, process: int, parts: list[int], now: int) -> None:
        for p in parts:
            self.owners.setdefault(p, set()).add(process)
        self._update(now)

    def revoke(self, process: int, parts: list[int] | None, now: int) -> None:
        for p in self.partitions if parts is None else parts:
            self.owners.get(p, set()).discard(process)
        self._update(now)

    @property
    def full(self) -> bool:
        return not self.unowned_since


def measure(history: Path, partitions: int) -> dict[str, list[float]]:
    """Longest unowned gap (s) and crash-to-full-coverage times (s) of one run."""
    cov = Coverage(set(range(partitions)))
    pending_crashes: list[int] = []
    recoveries: list[float] = []
    end = 0
    for line in history.read_text().splitlines():
        op = json.loads(line)
        value = op.get("value") or {}
        if value.get("final"):
            continue
        now = end = op["time"]
        if op["f"] == "rebalance":
            assigned = [p for _, p in value.get("assigned", [])]
            revoked = [p for _, p in value.get("revoked", [])]
            if assigned:
                cov.assign(op["process"], assigned, now)
            if revoked:
                cov.revoke(op["process"], revoked, now)
        elif op["f"] == "crash":
            cov.revoke(op["process"], None, now)
            pending_crashes.append(now)
        else:
            continue
        if cov.full and pending_crashes:
            recoveries += [(now - t) / NS for t in pending_crashes]
            pending_crashes = []
    for since in cov.unowned_since.values():  # still unowned at the end
        if cov.covered_once:
            cov.longest_gap_ns = max(cov.longest_gap_ns, end - since)
    recoveries += [(end - t) / NS for t in pending_crashes]  # never recovered: until the end
    return {"longest_gap_s": [cov.longest_gap_ns / NS], "recovery_s": recoveries}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--version", default=NEWEST_KAFKA)
    parser.add_argument("--store", type=Path, default=Path("store-bench"))
    args = parser.parse_args()
    cluster = f"rebalance-{args.version.replace('.', '')}"
    figures: dict[str, dict[str, list[float]]] = {
        p: {"longest_gap_s": [], "recovery_s": []} for p in PROTOCOLS
    }
    try:
        for i in range(args.runs):
            for protocol, preset in PROTOCOLS.items():
                spec = build_spec(
                    scenario_layer(preset),
                    {
                        "cluster": {"name": cluster, "kafka_version": args.version},
                        "nemesis": FAULTS,
                        "seed": 2000 + i,
                    },
                )
                outcome = run_test(spec, store=args.store)
                got = measure(outcome.run_dir.path / "history.jsonl", spec.topic.partitions)
                for k, v in got.items():
                    figures[protocol][k] += v
                print(
                    f"  run {i + 1} {protocol}: verdict={outcome.verdict} "
                    f"longest unowned {got['longest_gap_s'][0]:.1f} s, "
                    f"recoveries {[round(r, 1) for r in got['recovery_s']]}",
                    flush=True,
                )
    finally:
        destroy_cluster(cluster)
    print()
    print(
        "| protocol | runs | longest time a partition had no owner: median / max | "
        "crash to full coverage: median / max (crashes) |"
    )
    print("|---|---|---|---|")
    for protocol, f in figures.items():
        gaps, rec = f["longest_gap_s"], f["recovery_s"]
        rec_s = f"{statistics.median(rec):.1f} s / {max(rec):.1f} s ({len(rec)})" if rec else "none"
        print(
            f"| {protocol} | {len(gaps)} | {statistics.median(gaps):.1f} s / "
            f"{max(gaps):.1f} s | {rec_s} |"
        )


if __name__ == "__main__":
    main()
