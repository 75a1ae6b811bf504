"""The queue workload: producers, consumer groups, consumer failover, final drain.

This is the API the run orchestration calls (start / stop / final_drain).  It
only wires the pieces together: sends in workloads.producer, polls and
commits in workloads.consumer (or share-group members in
workloads.share_consumer, ``consumer.mode: share``), the drain in
workloads.drain, leader/ISR samples in workloads.sampler and the display in
workloads.progress.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError
from harness.spec import TestSpec
from workloads.consumer import CLOSE_TIMEOUT_S, COMMIT_TIMEOUT_S, ConsumerWorker, group_name
from workloads.drain import DrainResult, final_drain
from workloads.history import HistoryWriter
from workloads.producer import ProducerWorker, producer_config, split_rate
from workloads.progress import ProgressDisplay, RateMeter, Snapshot
from workloads.sampler import CLUSTER_STATE, ClusterSampler, Probe, admin_probe
from workloads.share_consumer import (
    AckPolicy,
    GroupProgress,
    ShareWorker,
    group_settings,
    share_drain,
    share_group_name,
)
from workloads.values import Counter

log = logging.getLogger(__name__)

# An interrupted run's flush of in-flight sends (see ``stop``).
HURRIED_FLUSH_S = 3.0
RATE_TOLERANCE = 0.10  # achieved below (1 - this) x target is a reported shortfall


@dataclass
class WorkloadSummary:
    duration_s: float
    sends_invoked: int
    sends_ok: int
    sends_fail: int
    sends_info: int
    sends_unknown_at_shutdown: int  # counted in sends_info too
    polls: int
    records_read: int
    commits_ok: int
    commits_failed: int
    rebalances: int
    consumer_crashes: int
    producer_crashes: int
    target_rate: float  # <= 0: unlimited
    achieved_rate: float  # sends invoked per second
    acked_rate: float  # sends acknowledged per second
    rate_shortfall: bool
    rate_message: str
    workers_stuck: list[str]  # threads that did not stop within their bound

    def __str__(self) -> str:
        return (
            f"{self.sends_invoked} sends ({self.sends_ok} ok, {self.sends_fail} fail, "
            f"{self.sends_info} info) in {self.duration_s:.1f}s; {self.polls} polls read "
            f"{self.records_read} records; {self.consumer_crashes} consumer crashes; "
            f"{self.rate_message}"
        )


def rate_verdict(target: float, achieved: float) -> tuple[bool, str]:
    """Shortfall flag and a message that states the numbers either way."""
    if target <= 0:
        return False, f"achieved {achieved:.0f} sends/s (no target: unlimited)"
    ratio = achieved / target
    if ratio < 1 - RATE_TOLERANCE:
        return True, (
            f"RATE SHORTFALL: achieved {achieved:.0f} sends/s, {ratio:.0%} of the "
            f"{target:.0f}/s target"
        )
    return False, f"achieved {achieved:.0f} sends/s ({ratio:.0%} of the {target:.0f}/s target)"


class QueueWorkload:
    def __init__(
        self,
        spec: TestSpec,
        bootstrap: str,
        history: HistoryWriter,
        run_dir: Path,
        fault_status: Callable[[], str] | None = None,
        *,
        probe: Probe | None = None,
        sample_interval_s: float = 1.0,
        live: bool | None = None,
    ) -> None:
        producer_config(spec.producer, bootstrap, "validate")  # ConfigError early, not in a thread
        if spec.consumer.groups < 0 or spec.consumer.workers_per_group < 1:
            raise ConfigError(
                "consumer.groups must be >= 0 and consumer.workers_per_group >= 1, got "
                f"{spec.consumer.groups} and {spec.consumer.workers_per_group}"
            )
        self.spec = spec
        self.bootstrap = bootstrap
        self.history = history
        self.run_dir = Path(run_dir)
        self.fault_status = fault_status or (lambda: "none")
        self.processes = Counter()
        self.values = Counter()
        self._stop_producers = threading.Event()
        self._stop_consumers = threading.Event()
        self._stop_crasher = threading.Event()
        flush_s = spec.producer.delivery_timeout_ms / 1000 + 2
        self.producers = [
            ProducerWorker(
                spec, bootstrap, history, self.processes, self.values, rate,
                self._stop_producers, flush_s,
            )
            for rate in split_rate(spec.producer.rate, spec.producer.workers)
        ]  # fmt: skip
        self.consumers = self._consumers()
        self.sampler = ClusterSampler(
            probe or admin_probe(bootstrap, spec.topic.name),
            self.run_dir / CLUSTER_STATE,
            history.elapsed_ns,
            sample_interval_s,
        )
        self._meter = RateMeter()
        self.display = ProgressDisplay(self._snapshot, live=live)
        self._crasher = threading.Thread(target=self._crash_loop, name="crasher", daemon=True)
        self._started = 0.0
        self._send_duration = 0.0

    @property
    def share(self) -> bool:
        return self.spec.consumer.mode == "share"

    def _consumers(self) -> list[ConsumerWorker | ShareWorker]:
        """One worker per group slot: consumer-group members, or share-group members."""
        c = self.spec.consumer
        if not self.share:
            return [
                ConsumerWorker(
                    self.spec, self.bootstrap, self.history, self.processes,
                    group_name(self.spec, k), slot, self._stop_consumers,
                )
                for k in range(c.groups)
                for slot in range(c.workers_per_group)
            ]  # fmt: skip
        progress = GroupProgress()
        rng = random.Random(self.spec.seed)
        return [
            ShareWorker(
                self.spec, self.bootstrap, self.history, self.processes,
                share_group_name(self.spec, k), self._stop_consumers, progress,
                AckPolicy(
                    c.share_release_probability, c.share_reject_probability,
                    random.Random(rng.random()),
                ),
            )
            for k in range(c.groups)
            for _ in range(c.workers_per_group)
        ]  # fmt: skip

    def _share_groups(self) -> list[str]:
        return [share_group_name(self.spec, k) for k in range(self.spec.consumer.groups)]

    def start(self) -> None:
        """Start consumers first (so they are in their groups), then producers."""
        self._started = time.monotonic()
        if self.share:
            from harness import admin

            for group in self._share_groups():
                admin.set_group_config(self.bootstrap, group, group_settings(self.spec))
        self.sampler.start()
        for c in self.consumers:
            c.start()
        for p in self.producers:
            p.start()
        if self.spec.consumer.crash_interval_s and self.consumers:
            self._crasher.start()
        self.display.start()

    def stop(self, hurry: bool = False) -> WorkloadSummary:
        """Stop producers (bounded flush), then consumers (clean close), then the sampler.

        ``hurry`` (an interrupted run) gives in-flight sends only a short
        flush: their outcome stays unknown in the history, which is honest,
        and the run can heal and exit within its 30 s.
        """
        stuck: list[str] = []
        if hurry:
            for p in self.producers:
                p.flush_timeout_s = min(p.flush_timeout_s, HURRIED_FLUSH_S)
        self._stop_crasher.set()
        self._stop_producers.set()
        self._send_duration = time.monotonic() - self._started
        flush_s = max(p.flush_timeout_s for p in self.producers) if self.producers else 0.0
        deadline = time.monotonic() + flush_s + 5
        for p in self.producers:
            if not p.join(max(0.1, deadline - time.monotonic())):
                stuck.append(f"producer {p.process}")
        self._stop_consumers.set()
        deadline = time.monotonic() + COMMIT_TIMEOUT_S + CLOSE_TIMEOUT_S + 2
        for c in self.consumers:
            if not c.join(max(0.1, deadline - time.monotonic())):
                stuck.append(f"consumer {c.process}")
        if self._crasher.is_alive():
            self._crasher.join(2.0)
        self.sampler.stop()
        self.display.stop()
        summary = self.summary(stuck)
        (log.warning if summary.rate_shortfall else log.info)("workload: %s", summary)
        return summary

    def final_drain(self, timeout_s: float) -> DrainResult:
        """Read every partition from the beginning to its high watermark (fresh consumer).

        Share groups first get their own drain: fresh members accept what is
        still deliverable until the groups go quiet (workloads.share_consumer).
        """
        if self.share:
            for r in share_drain(
                self.spec, self.bootstrap, self.history, self.processes,
                self._share_groups(), timeout_s,
            ):  # fmt: skip
                (log.info if r.complete else log.warning)("%s", r)
        result = final_drain(
            self.bootstrap,
            self.spec.topic.name,
            self.spec.topic.partitions,
            self.history,
            self.processes.next(),
            timeout_s,
        )
        (log.info if result.complete else log.warning)("%s", result)
        return result

    # -- consumer failover ----------------------------------------------

    def _crash_loop(self) -> None:
        """Crash one consumer every crash_interval_s, chosen by the seeded RNG."""
        rng = random.Random(self.spec.seed)
        interval = float(self.spec.consumer.crash_interval_s or 0)
        while not self._stop_crasher.wait(interval):
            victim = rng.choice(self.consumers)
            victim.request_crash(f"consumer failover: scheduled crash every {interval:g}s")

    # -- figures ---------------------------------------------------------

    def summary(self, stuck: list[str] | None = None) -> WorkloadSummary:
        ps = [p.stats for p in self.producers]
        cs = [c.stats for c in self.consumers]
        duration = self._send_duration or (time.monotonic() - self._started)
        invoked = sum(s.invoked for s in ps)
        ok = sum(s.ok for s in ps)
        achieved = invoked / duration if duration > 0 else 0.0
        shortfall, message = rate_verdict(self.spec.producer.rate, achieved)
        return WorkloadSummary(
            duration_s=duration,
            sends_invoked=invoked,
            sends_ok=ok,
            sends_fail=sum(s.fail for s in ps),
            sends_info=sum(s.info for s in ps),
            sends_unknown_at_shutdown=sum(s.unknown_at_shutdown for s in ps),
            polls=sum(s.polls for s in cs),
            records_read=sum(s.records for s in cs),
            commits_ok=sum(s.commits_ok for s in cs),
            commits_failed=sum(s.commits_failed for s in cs),
            rebalances=sum(s.rebalances for s in cs),
            consumer_crashes=sum(s.crashes for s in cs),
            producer_crashes=sum(s.crashes for s in ps),
            target_rate=self.spec.producer.rate,
            achieved_rate=achieved,
            acked_rate=ok / duration if duration > 0 else 0.0,
            rate_shortfall=shortfall,
            rate_message=message,
            workers_stuck=stuck or [],
        )

    def _snapshot(self) -> Snapshot:
        s = self.summary()
        try:
            fault = self.fault_status() or "none"
        except Exception as e:  # the display must not depend on the nemesis being healthy
            fault = f"? ({type(e).__name__})"
        return Snapshot(
            elapsed_s=time.monotonic() - self._started,
            sends=s.sends_invoked,
            ok=s.sends_ok,
            fail=s.sends_fail,
            info=s.sends_info,
            polls=s.polls,
            records=s.records_read,
            crashes=s.consumer_crashes,
            target_rate=s.target_rate,
            rate=self._meter.rate(s.sends_invoked),
            fault=fault,
        )
