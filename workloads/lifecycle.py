"""The lifecycle every workload shares, so a workload module supplies only its clients.

A workload subclasses ``Lifecycle`` and, in ``build_clients``, fills two
lists: ``senders`` (producers, stopped first by a bounded flush) and
``slots`` (``workloads.worker.Slot`` threads: consumers, transactional
processes; the crash schedule picks its victims among them).  It names what
its slots are (``slot_kind``), what a crash fails over (``failover``), how
long its slots may take to stop (``slot_bound``) and what it counts
(``unit``), builds its own summary and its ``final_drain`` (through
``drain_topics``), and may override ``prepare`` (cluster set-up before its
clients start) and ``topics``.  Everything else is here, the same for every
workload: the clock, the cluster sampler, the start order (slots before
senders, so consumers are in their groups before the first send), the
seeded crash schedule, the bounded stop, the progress display and the
final drain of every topic the workload wrote.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.workloads.drain import DrainResult, final_drain
from kafka_chaos.workloads.producer import ProducerWorker, producer_config, split_rate
from kafka_chaos.workloads.progress import Progress, ProgressDisplay, RateMeter, Snapshot
from kafka_chaos.workloads.sampler import CLUSTER_STATE, ClusterSampler, Probe, admin_probe
from kafka_chaos.workloads.values import Counter
from kafka_chaos.workloads.worker import Slot

# An interrupted run's flush of in-flight sends (see ``Lifecycle.stop``).
HURRIED_FLUSH_S = 3.0
RATE_TOLERANCE = 0.10  # achieved below (1 - this) x target is a reported shortfall
CRASHER_JOIN_S = 2.0


def rate_verdict(target: float, achieved: float, unit: str = "sends") -> tuple[bool, str]:
    """Shortfall flag and a message that states the numbers either way."""
    if target <= 0:
        return False, f"achieved {achieved:.0f} {unit}/s (no target: unlimited)"
    ratio = achieved / target
    if ratio < 1 - RATE_TOLERANCE:
        return True, (
            f"RATE SHORTFALL: achieved {achieved:.0f} {unit}/s, {ratio:.0%} of the "
            f"{target:.0f}/s target"
        )
    return False, f"achieved {achieved:.0f} {unit}/s ({ratio:.0%} of the {target:.0f}/s target)"


def per_second(count: int, duration_s: float) -> float:
    return count / duration_s if duration_s > 0 else 0.0


class Summary(Protocol):
    """What the lifecycle reads of a workload's summary."""

    rate_shortfall: bool

    def progress(self) -> Progress: ...


class Sender(Protocol):
    """A client stopped by flushing what it has in flight within ``flush_timeout_s``."""

    process: int
    flush_timeout_s: float

    def start(self) -> None: ...

    def join(self, timeout: float) -> bool: ...


S = TypeVar("S", bound=Summary)


class Lifecycle(Generic[S]):
    """Start, crash schedule, bounded stop, progress and final drain of one workload."""

    unit = "sends"  # what the display's and the rate verdict's counts count
    slot_kind = "consumer"  # how a slot that did not stop is named in the summary
    failover = "consumer failover"  # the crash schedule's reason, before its interval

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
        processes: Counter | None = None,
        values: Counter | None = None,
    ) -> None:
        self.spec = spec
        self.bootstrap = bootstrap
        self.history = history
        self.run_dir = Path(run_dir)
        self.fault_status = fault_status or (lambda: "none")
        self.log = logging.getLogger(type(self).__module__)  # log lines name the workload
        # Shared by the workloads of one run (a failover's second cluster):
        # process numbers and values stay unique across the whole history.
        self.processes = processes or Counter()
        self.values = values or Counter()
        self.stop_senders = threading.Event()
        self.stop_slots = threading.Event()
        self._stop_crasher = threading.Event()
        self.senders: Sequence[Sender] = []
        self.slots: Sequence[Slot] = []
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
        self._duration = 0.0
        self.build_clients()

    # -- what a workload supplies -----------------------------------------

    def build_clients(self) -> None:
        """Check the workload's settings (ConfigError) and fill ``senders`` and ``slots``.

        Called at the end of ``__init__``: nothing has started or connected
        yet, so a refused setting leaves nothing behind.
        """
        raise NotImplementedError

    def prepare(self) -> None:
        """Cluster set-up the workload needs before its clients start (bounded)."""

    def slot_bound(self, hurry: bool) -> float:
        """Seconds every slot together may take to stop once asked."""
        raise NotImplementedError

    def summary(self, stuck: list[str] | None = None) -> S:
        """Counts so far (or of the whole run, after ``stop``); ``stuck``: who did not stop."""
        raise NotImplementedError

    def topics(self) -> list[str]:
        """Every topic this workload writes: the final drain reads them all."""
        return [self.spec.topic.name]

    # -- the shared lifecycle ---------------------------------------------

    def plain_producers(self) -> list[ProducerWorker]:
        """``producer.workers`` paced producers of the run's topic, stopped by ``stop_senders``."""
        p = self.spec.producer
        producer_config(p, self.bootstrap, "validate")  # ConfigError now, not in a thread
        flush_s = p.delivery_timeout_ms / 1000 + 2
        worker = ProducerWorker
        if p.client == "java":
            from kafka_chaos.workloads.java.producer import (
                JavaProducerWorker,
            )  # JPype only when asked

            worker = JavaProducerWorker
        return [
            worker(
                self.spec, self.bootstrap, self.history, self.processes, self.values, rate,
                self.stop_senders, flush_s,
            )
            for rate in split_rate(p.rate, p.workers)
        ]  # fmt: skip

    def start(self) -> None:
        """Start slots first (so consumers are in their groups), then senders."""
        self.prepare()
        self._started = time.monotonic()
        self.sampler.start()
        for s in self.slots:
            s.start()
        for p in self.senders:
            p.start()
        if self.spec.consumer.crash_interval_s and self.slots:
            self._crasher.start()
        self.display.start()

    def stop(self, hurry: bool = False) -> S:
        """Stop senders (bounded flush), then slots (``slot_bound``), then the sampler.

        ``hurry`` (an interrupted run) gives in-flight sends only a short
        flush: their outcome stays unknown in the history, which is honest,
        and the run can heal and exit within its 30 s.
        """
        stuck: list[str] = []
        if hurry:
            for p in self.senders:
                p.flush_timeout_s = min(p.flush_timeout_s, HURRIED_FLUSH_S)
        self._stop_crasher.set()
        self.stop_senders.set()
        self._duration = time.monotonic() - self._started
        flush_s = max((p.flush_timeout_s for p in self.senders), default=0.0)
        stuck += _join(self.senders, flush_s + 5, "producer")
        self.stop_slots.set()
        stuck += _join(self.slots, self.slot_bound(hurry), self.slot_kind)
        if self._crasher.is_alive():
            self._crasher.join(CRASHER_JOIN_S)
        self.sampler.stop()
        self.display.stop()
        summary = self.summary(stuck)
        (self.log.warning if summary.rate_shortfall else self.log.info)("workload: %s", summary)
        return summary

    def drain_topics(self, timeout_s: float) -> list[DrainResult]:
        """Read every topic of ``topics()``, read_committed, up to its high watermarks."""
        results = []
        deadline = time.monotonic() + timeout_s
        for topic in self.topics():
            result = final_drain(
                self.bootstrap,
                topic,
                self.spec.topic.partitions,
                self.history,
                self.processes.next(),
                max(1.0, deadline - time.monotonic()),
            )
            (self.log.info if result.complete else self.log.warning)("%s: %s", topic, result)
            results.append(result)
        return results

    def duration_s(self) -> float:
        """The send phase: up to ``stop``, or so far."""
        return self._duration or (time.monotonic() - self._started)

    def _crash_loop(self) -> None:
        """Crash one slot every crash_interval_s, chosen by the seeded RNG (replayable)."""
        rng = random.Random(self.spec.seed)
        interval = float(self.spec.consumer.crash_interval_s or 0)
        while not self._stop_crasher.wait(interval):
            victim = rng.choice(self.slots)
            victim.request_crash(f"{self.failover}: scheduled crash every {interval:g}s")

    def _snapshot(self) -> Snapshot:
        p = self.summary().progress()
        try:
            fault = self.fault_status() or "none"
        except Exception as e:  # the display must not depend on the nemesis being healthy
            fault = f"? ({type(e).__name__})"
        return Snapshot(
            elapsed_s=time.monotonic() - self._started,
            counts=p,
            rate=self._meter.rate(p.done),
            fault=fault,
            unit=self.unit,
        )


def _join(clients: Sequence[Sender] | Sequence[Slot], bound_s: float, kind: str) -> list[str]:
    """Join every client within one shared ``bound_s``; name those still running."""
    deadline = time.monotonic() + bound_s
    return [
        f"{kind} {c.process}" for c in clients if not c.join(max(0.1, deadline - time.monotonic()))
    ]
