"""The queue workload: producers, consumer groups, consumer failover, final drain.

Only what is the queue's own is here: its clients (sends in
workloads.producer, polls and commits in workloads.consumer, or share-group
members in workloads.share_consumer, ``consumer.mode: share``) and its
summary.  Start, crash schedule, stop, progress display and the final drain
are workloads.lifecycle's, the same for every workload.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.kafka_clients import CLOSE_TIMEOUT_S
from kafka_chaos.harness.kafka_names import group_name, share_group_name
from kafka_chaos.workloads.consumer import COMMIT_TIMEOUT_S, ConsumerWorker
from kafka_chaos.workloads.drain import DrainResult
from kafka_chaos.workloads.lifecycle import Lifecycle, per_second, rate_verdict
from kafka_chaos.workloads.producer import ProducerWorker
from kafka_chaos.workloads.progress import Progress
from kafka_chaos.workloads.share_consumer import (
    AckPolicy,
    GroupProgress,
    ShareWorker,
    group_settings,
    share_drain,
)


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

    def progress(self) -> Progress:
        return Progress(
            self.sends_invoked, self.sends_ok, self.sends_fail, self.sends_info,
            self.polls, self.records_read, self.consumer_crashes, self.target_rate,
        )  # fmt: skip


class QueueWorkload(Lifecycle[WorkloadSummary]):
    """Paced producers and consumer-group (or share-group) members of the run's topic."""

    producers: list[ProducerWorker]
    consumers: list[ConsumerWorker | ShareWorker]

    def build_clients(self) -> None:
        c = self.spec.consumer
        self.producers = self.plain_producers()
        if c.groups < 0 or c.workers_per_group < 1:
            raise ConfigError(
                "consumer.groups must be >= 0 and consumer.workers_per_group >= 1, got "
                f"{c.groups} and {c.workers_per_group}"
            )
        self.consumers = self._consumers()
        self.senders, self.slots = self.producers, self.consumers

    @property
    def share(self) -> bool:
        return self.spec.consumer.mode == "share"

    def _consumers(self) -> list[ConsumerWorker | ShareWorker]:
        """One worker per group slot: consumer-group members, or share-group members."""
        c = self.spec.consumer
        if not self.share:
            worker = ConsumerWorker
            if c.client == "java":
                from kafka_chaos.workloads.java.consumer import (
                    JavaConsumerWorker,
                )  # JPype only when asked

                worker = JavaConsumerWorker
            return [
                worker(
                    self.spec, self.bootstrap, self.history, self.processes,
                    group_name(self.spec, k), slot, self.stop_slots,
                )
                for k in range(c.groups)
                for slot in range(c.workers_per_group)
            ]  # fmt: skip
        progress = GroupProgress()
        rng = random.Random(self.spec.seed)
        share_worker = self._share_worker()
        return [
            share_worker(
                self.spec, self.bootstrap, self.history, self.processes,
                share_group_name(self.spec, k), self.stop_slots, progress,
                AckPolicy(
                    c.share_release_probability, c.share_reject_probability,
                    random.Random(rng.random()),
                ),
            )
            for k in range(c.groups)
            for _ in range(c.workers_per_group)
        ]  # fmt: skip

    def _share_worker(self) -> type[ShareWorker]:
        if self.spec.consumer.client == "java":
            from kafka_chaos.workloads.java.share_consumer import (
                JavaShareWorker,
            )  # JPype only when asked

            return JavaShareWorker
        return ShareWorker

    def _share_groups(self) -> list[str]:
        return [share_group_name(self.spec, k) for k in range(self.spec.consumer.groups)]

    def prepare(self) -> None:
        """Share groups get their settings before any member joins."""
        if self.share:
            from kafka_chaos.harness import admin

            for group in self._share_groups():
                admin.set_group_config(self.bootstrap, group, group_settings(self.spec))

    def slot_bound(self, hurry: bool) -> float:
        """A consumer's last commit and its clean close, each bounded."""
        return COMMIT_TIMEOUT_S + CLOSE_TIMEOUT_S + 2

    def final_drain(self, timeout_s: float) -> DrainResult:
        """Read every partition from the beginning to its high watermark (fresh consumer).

        Share groups first get their own drain: fresh members accept what is
        still deliverable until the groups go quiet and the last crashed
        member's session has surely expired (workloads.share_consumer).
        """
        if self.share:
            crashes = [
                c.last_crash_at for c in self.consumers
                if isinstance(c, ShareWorker) and c.last_crash_at is not None
            ]  # fmt: skip
            for r in share_drain(
                self.spec, self.bootstrap, self.history, self.processes,
                self._share_groups(), timeout_s, self._share_worker(),
                last_crash_at=max(crashes, default=None),
            ):  # fmt: skip
                (self.log.info if r.complete else self.log.warning)("%s", r)
        return self.drain_topics(timeout_s)[0]

    def summary(self, stuck: list[str] | None = None) -> WorkloadSummary:
        ps = [p.stats for p in self.producers]
        cs = [c.stats for c in self.consumers]
        duration = self.duration_s()
        invoked = sum(s.invoked for s in ps)
        ok = sum(s.ok for s in ps)
        achieved = per_second(invoked, duration)
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
            acked_rate=per_second(ok, duration),
            rate_shortfall=shortfall,
            rate_message=message,
            workers_stuck=stuck or [],
        )
