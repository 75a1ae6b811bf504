"""Disaster recovery: the queue workload on dc1, a failover to dc2, both clusters drained.

The seed lab's question, run as a test: producers write to dc1 and a group
reads from dc1 while MirrorMaker 2 copies the topic to dc2.  At the planned
time (``mirror.failover_at_s``) the run fails over the way an operator
would: it stops dc1's clients without waiting out their timeouts, reads
MirrorMaker's checkpoints, commits the translated offsets to the group on
dc2, and starts the same producers and group against dc2.  Everything goes
into the one history; dc2's lines name their topics ``dc2/<topic>``
(``workloads.cluster_history``), and the failover is two lines of its own
(``f: "failover"``, docs/history.md) with what it applied.

After the heal the final drain reads dc1, waits for MirrorMaker to copy
what dc1 holds (its own record of how far it copied), and reads dc2.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_chaos.harness import admin
from kafka_chaos.harness import mirror_maker as mm
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.kafka_names import group_name
from kafka_chaos.harness.mirror_pair import dc2_name
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.workloads import mirror_spec, mirror_sync
from kafka_chaos.workloads.cluster_history import ClusterHistory, qualified
from kafka_chaos.workloads.consumer import ConsumerWorker
from kafka_chaos.workloads.drain import DrainResult, final_drain
from kafka_chaos.workloads.queue import QueueWorkload, WorkloadSummary
from kafka_chaos.workloads.sampler import Probe

log = logging.getLogger(__name__)

DC2 = "dc2"
NEMESIS = "nemesis"
FAILOVER_ID = 900  # the failover's id among the run's faults (the nemesis numbers from 0)
TRANSLATE_TIMEOUT_S = 20.0
ENDS_TIMEOUT_S = 5.0  # for dc2's end offsets as the failover begins
CATCH_UP_POLL_S = 2.0
DC1_GRACE_S = 3.0


@dataclass
class MirrorSummary:
    dc1: WorkloadSummary
    dc2: WorkloadSummary | None

    @property
    def rate_shortfall(self) -> bool:
        return self.dc1.rate_shortfall

    def __str__(self) -> str:
        after = f"; dc2 after the failover: {self.dc2}" if self.dc2 else "; no failover"
        return f"dc1: {self.dc1}{after}"


class MirrorWorkload:
    """``QueueWorkload`` on dc1, then on dc2 from the failover on (``workloads.registry``)."""

    def __init__(
        self,
        spec: TestSpec,
        bootstrap: str,
        history: HistoryWriter,
        run_dir: Path,
        fault_status: Any = None,
        *,
        probe: Probe | None = None,
    ) -> None:
        self.check_config(spec)
        self.spec = spec
        self.history = history
        self.run_dir = Path(run_dir)
        self.fault_status = fault_status
        dc2 = Cluster.load(dc2_name(spec.cluster.name))
        self.dc2_bootstrap = dc2.bootstrap_servers()
        self.dc2_rf = min(3, len(dc2.nodes))
        dc2.close()
        self.remote = mm.remote_topic(spec.topic.name, mirror_spec.of(spec).replication_policy)
        # dc2's topics: MirrorMaker's copy, and what producers write after a failover.
        self.dc2_topics = list(dict.fromkeys([self.remote, spec.topic.name]))
        self.groups = [group_name(spec, k) for k in range(spec.consumer.groups)]
        self.dc2_history = ClusterHistory(history, DC2, [*self.dc2_topics, *self.groups])
        self.dc1 = QueueWorkload(spec, bootstrap, history, run_dir, fault_status, probe=probe)
        self.dc2: QueueWorkload | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._t0 = 0.0
        self._dc1_stopper: threading.Thread | None = None
        self._failover = threading.Thread(target=self._fail_over_on_time, name="failover",
                                          daemon=True)  # fmt: skip

    @staticmethod
    def check_config(spec: TestSpec) -> None:
        if not mirror_spec.of(spec).enabled:
            raise ConfigError("workload mirror needs mirror.enabled (a second cluster)")
        mm.validate(mirror_spec.of(spec))
        c = spec.consumer
        if c.mode != "subscribe":
            raise ConfigError(
                "workload mirror: consumer.mode must be subscribe (the group moves to dc2 "
                "at MirrorMaker's translated offsets)"
            )

    # -- the Workload protocol --------------------------------------------

    def start(self) -> None:
        self._t0 = time.monotonic()
        self.dc1.start()
        if mirror_spec.of(self.spec).failover_at_s is not None:
            self._failover.start()

    def stop(self, hurry: bool = False) -> MirrorSummary:
        self._stop.set()
        if self._failover.is_alive():
            self._failover.join(TRANSLATE_TIMEOUT_S * 2 + 30)
        with self._lock:
            first = (
                self.dc1.stop(hurry) if not self.dc1.stop_senders.is_set() else self.dc1.summary()
            )
            second = self.dc2.stop(hurry) if self.dc2 is not None else None
        return MirrorSummary(first, second)

    def final_drain(self, timeout_s: float) -> DrainResult:
        """dc1, then (once MirrorMaker has caught up, or given up on) dc2."""
        deadline = time.monotonic() + timeout_s
        first = self.dc1.final_drain(timeout_s)
        self.wait_caught_up(mirror_spec.of(self.spec).catch_up_timeout_s)
        results = [first]
        for topic in self._drained_dc2_topics():
            result = final_drain(
                self.dc2_bootstrap, topic, self.spec.topic.partitions, self.dc2_history,
                self.dc1.processes.next(), max(5.0, deadline - time.monotonic()),
            )  # fmt: skip
            (log.info if result.complete else log.warning)("dc2 %s: %s", topic, result)
            results.append(result)
        return _merged(results)

    def summary(self) -> MirrorSummary:
        return MirrorSummary(self.dc1.summary(), self.dc2.summary() if self.dc2 else None)

    # -- the failover -------------------------------------------------------

    def _fail_over_on_time(self) -> None:
        at = float(mirror_spec.of(self.spec).failover_at_s or 0.0)
        if self._stop.wait(max(0.0, self._t0 + at - time.monotonic())):
            return
        self.fail_over()

    def fail_over(self) -> None:
        """Move producers and the group to dc2, the group at its translated offsets."""
        planned = float(mirror_spec.of(self.spec).failover_at_s or 0.0)
        with self._lock:
            if self._stop.is_set() or self.dc2 is not None:
                return
            self._record("start", planned, {})
            # What dc2 holds as the failover begins: the RPO is judged against it.
            # Briefly: an operator does not hold the failover for a measurement
            # (dc2's partitions that did not answer are left out, and said so).
            ends = admin.end_offsets(
                self.dc2_bootstrap, self.remote, self.spec.topic.partitions, ENDS_TIMEOUT_S
            )
            self._stop_dc1()
            error = None
            applied: dict[str, list[list[Any]]] = {}
            try:
                applied = self._apply_checkpoints(self.groups)
            except Exception as e:  # the failover goes on: the group starts where Kafka says
                error = f"{type(e).__name__}: {e}"
                log.warning("failover: translating offsets failed: %s", error)
            self._ensure_dc2_topic()
            self.dc2 = self._dc2_workload()
            self.dc2.start()
            extra: dict[str, Any] = {
                "groups": applied,
                "dc2_ends": [[qualified(DC2, self.remote), p, e] for p, e in sorted(ends.items())],
            }
            if error:
                extra["error"] = error
            self._record("end", planned, extra)
            log.info("failover to dc2 done; translated offsets %s", applied)

    def _stop_dc1(self) -> None:
        """Stop dc1's clients, waiting at most DC1_GRACE_S: an operator failing over
        from a cut-off data centre does not wait out its clients' timeouts.  The
        stop goes on in the background (``stop`` joins it)."""
        self._dc1_stopper = threading.Thread(
            target=lambda: self.dc1.stop(hurry=True), name="stop dc1", daemon=True
        )
        self._dc1_stopper.start()
        self._dc1_stopper.join(DC1_GRACE_S)
        if self._dc1_stopper.is_alive():
            log.info("failover: dc1's clients still stopping after %.0f s; going on", DC1_GRACE_S)

    def _apply_checkpoints(self, groups: list[str]) -> dict[str, list[list[Any]]]:
        found = mirror_sync.checkpoints(
            self.dc2_bootstrap, mm.CHECKPOINTS_TOPIC, groups, TRANSLATE_TIMEOUT_S
        )
        applied: dict[str, list[list[Any]]] = {}
        for group in groups:
            mine = [c for c in found if c.group == group]
            mirror_sync.commit_group_offsets(
                self.dc2_bootstrap, group, [(c.topic, c.partition, c.downstream) for c in mine],
                TRANSLATE_TIMEOUT_S,
            )  # fmt: skip
            applied[qualified(DC2, group)] = [
                [qualified(DC2, c.topic), c.partition, c.downstream, c.upstream] for c in mine
            ]
        return applied

    def _ensure_dc2_topic(self) -> None:
        """dc2's topic for the failed-over producers (MirrorMaker made it under identity)."""
        topic = dataclasses.replace(
            self.spec.topic,
            replication_factor=self.dc2_rf,
            min_insync_replicas=min(self.spec.topic.min_insync_replicas, self.dc2_rf),
        )
        try:
            admin.create_topic(self.dc2_bootstrap, topic, timeout_s=30)
        except Exception as e:  # exists already, or dc2 is slow: the producers will say
            log.info("dc2 topic %s: %s", topic.name, e)

    def _dc2_workload(self) -> QueueWorkload:
        (self.run_dir / DC2).mkdir(exist_ok=True)
        work = QueueWorkload(
            self.spec, self.dc2_bootstrap, self.dc2_history,  # type: ignore[arg-type]
            self.run_dir / DC2, self.fault_status,
            processes=self.dc1.processes, values=self.dc1.values,
        )  # fmt: skip
        for consumer in work.consumers:
            if isinstance(consumer, ConsumerWorker):
                consumer.topics = list(self.dc2_topics)
        return work

    def _record(self, phase: str, planned: float, extra: dict[str, Any]) -> None:
        value = {"phase": phase, "id": FAILOVER_ID, "targets": [],
                 "planned_s": round(planned, 3),
                 "at_s": round(time.monotonic() - self._t0, 3), **extra}  # fmt: skip
        self.history.append(NEMESIS, "info", "failover", value)

    # -- MirrorMaker's catch-up --------------------------------------------

    def wait_caught_up(self, timeout_s: float) -> dict[int, int]:
        """Wait until MirrorMaker says it copied dc1's whole topic; what it lacks when it did not.

        Recorded as a ``mirror-caught-up`` line: the checks judge loss on dc2
        knowing whether MirrorMaker finished.
        """
        started = time.monotonic()
        deadline = started + timeout_s
        behind: dict[int, int] = {}
        copied: dict[int, int] = {}
        while True:
            ends = admin.end_offsets(
                self.dc1.bootstrap, self.spec.topic.name, self.spec.topic.partitions, 10.0
            )
            try:
                copied = mirror_sync.copied_offsets(
                    self.dc2_bootstrap, mm.OFFSETS_TOPIC, self.spec.topic.name, 10.0
                )
            except mirror_sync.IncompleteRead as e:  # dc2 restarting: ask again
                log.info("catch-up: %s", e)
            behind = mirror_sync.lagging(copied, ends)
            if len(ends) == self.spec.topic.partitions and not behind:
                break
            if time.monotonic() >= deadline:
                log.warning("MirrorMaker did not catch up within %.0f s: %s behind", timeout_s,
                            behind)  # fmt: skip
                break
            time.sleep(CATCH_UP_POLL_S)
        value = {
            "caught_up": not behind and len(ends) == self.spec.topic.partitions,
            "waited_s": round(time.monotonic() - started, 3),
            "behind": [[self.spec.topic.name, p, n] for p, n in sorted(behind.items())],
            # dc1 offsets MirrorMaker says it copied, up to and including these
            "copied": [[self.spec.topic.name, p, o] for p, o in sorted(copied.items())],
        }
        self.history.append(NEMESIS, "info", "mirror-caught-up", value)
        return behind

    def _drained_dc2_topics(self) -> list[str]:
        existing = []
        for topic in self.dc2_topics:
            try:
                admin.describe_topics(self.dc2_bootstrap, [topic], timeout_s=10)
                existing.append(topic)
            except Exception as e:
                log.warning("dc2 topic %s cannot be drained: %s", topic, e)
        return existing


def _merged(results: list[DrainResult]) -> DrainResult:
    """One result for the run: complete only if every cluster's drain was."""
    first = results[0]
    return DrainResult(
        complete=all(r.complete for r in results),
        reached=first.reached,
        high_watermarks=first.high_watermarks,
        unreached=sorted({p for r in results for p in r.unreached}),
        records=sum(r.records for r in results),
        elapsed_s=sum(r.elapsed_s for r in results),
        errors=[e for r in results for e in r.errors][-10:],
    )
