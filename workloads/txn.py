"""The transactional workload (``--workload txn``): Jepsen's Kafka transactions.

``txn.processes`` workers each run a ``TxnClient`` (a transactional producer
and a consumer) transaction after transaction, paced to ``txn.rate``.  In
consume-transform-produce mode (``txn.mode: ctp``) ordinary producers fill the
run's topic, and the transactional processes copy each record they consume to
``<topic>-out``, committing their consumer offsets inside the transaction:
the exactly-once pipeline of Kafka Streams and of Kafka's own
TransactionalMessageCopier.

Consumer failover (``consumer.crash_interval_s``) crashes a transactional
process between two of its micro-ops, so the transaction in flight is left
without a completion, as after a real client crash.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException

from harness import admin
from harness.spec import TestSpec, replace
from workloads.drain import DrainResult, final_drain
from workloads.history import HistoryWriter
from workloads.producer import Pacer, ProducerWorker, producer_config, split_rate
from workloads.progress import ProgressDisplay, RateMeter, Snapshot
from workloads.queue import rate_verdict
from workloads.sampler import CLUSTER_STATE, ClusterSampler, Probe, admin_probe
from workloads.txn_client import CTP, Teardown, TxnClient, TxnStats, output_topic, validate
from workloads.values import Counter
from workloads.worker import RESTART_PAUSE_S, Slot

log = logging.getLogger(__name__)


class TxnWorker(Slot):
    """One transactional slot: incarnations of ``TxnClient`` until stopped; a crash
    asked for lands at the next micro-op boundary (within one poll timeout)."""

    def __init__(
        self,
        spec: TestSpec,
        bootstrap: str,
        history: HistoryWriter,
        processes: Counter,
        values: Counter,
        slot: int,
        rate: float,
        stop: threading.Event,
    ) -> None:
        super().__init__(history, stop, f"txn-{slot}")
        self.spec = spec
        self.bootstrap = bootstrap
        self.processes = processes
        self.values = values
        self.slot = slot
        self.rate = rate
        self.stats = TxnStats()
        self.rng = random.Random(f"{spec.seed}-txn-{slot}")

    def _run(self) -> None:
        pacer = Pacer(self.rate)
        while not self.stop_event.is_set():
            self.process = self.processes.next()
            client = None
            crashed = True  # until the incarnation ends by the stop event
            try:
                client = TxnClient(
                    self.spec, self.bootstrap, self.history, self.process, self.slot,
                    self.values, self.rng, self.stats, self._take_crash,
                )  # fmt: skip
                client.open()
                while not self.stop_event.is_set():
                    wait = pacer.delay(time.monotonic())
                    if wait and self.stop_event.wait(wait):
                        break
                    pacer.sent()
                    client.run_one()
                crashed = False
            except ValueError:  # the history was closed under us: the run is over
                return
            except Teardown as e:
                self._crash(str(e))
            except KafkaException as e:
                if client is None and _refused_config(e):  # the same on every retry: stop
                    log.error("txn process %s: client refused: %s", self.process, e)
                    self._crash(f"client configuration refused: {e}")
                    return
                log.warning("txn worker %s failed: %s", self.process, e)
                self._crash(f"{type(e).__name__}: {e}")
            except Exception as e:  # a bug must not end the run silently
                log.exception("txn worker %s failed", self.process)
                self._crash(f"{type(e).__name__}: {e}")
            finally:
                if client is not None:
                    client.close(record_revocations=not crashed)
            self.stop_event.wait(RESTART_PAUSE_S)

    def _crash(self, reason: str) -> None:
        try:
            self.history.append(self.process, "info", "crash", {"reason": reason})
        except ValueError:
            return
        self.stats.crashes += 1


def _refused_config(e: KafkaException) -> bool:
    err = e.args[0] if e.args else None
    return isinstance(err, KafkaError) and err.code() == KafkaError._INVALID_ARG


@dataclass
class TxnSummary:
    duration_s: float
    txns_ok: int
    txns_fail: int
    txns_info: int
    client_aborts: int
    sends_committed: int
    polls: int
    records_read: int
    seeks: int
    crashes: int
    input_sends_ok: int  # ctp: acknowledged sends of the plain producers
    target_rate: float
    achieved_rate: float  # transactions completed per second
    rate_shortfall: bool
    rate_message: str
    workers_stuck: list[str]

    def __str__(self) -> str:
        return (
            f"{self.txns_ok + self.txns_fail + self.txns_info} txns ({self.txns_ok} committed, "
            f"{self.txns_fail} aborted of which {self.client_aborts} on purpose, "
            f"{self.txns_info} unknown) in {self.duration_s:.1f}s; {self.sends_committed} "
            f"committed sends; {self.polls} polls read {self.records_read} records; "
            f"{self.seeks} rewinds; {self.crashes} client crashes; {self.rate_message}"
        )


class TxnWorkload:
    """The ``registry.Workload`` protocol for transactions."""

    check_config = staticmethod(validate)

    def __init__(
        self,
        spec: TestSpec,
        bootstrap: str,
        history: HistoryWriter,
        run_dir: Path,
        fault_status: Callable[[], str] | None = None,
        *,
        probe: Probe | None = None,
        live: bool | None = None,
    ) -> None:
        validate(spec)
        self.spec = spec
        self.bootstrap = bootstrap
        self.history = history
        self.fault_status = fault_status or (lambda: "none")
        self.processes = Counter()
        self.values = Counter()
        self._stop = threading.Event()
        self._stop_input = threading.Event()
        self._stop_crasher = threading.Event()
        self.ctp = spec.txn.mode == CTP
        self.workers = [
            TxnWorker(spec, bootstrap, history, self.processes, self.values, slot, rate, self._stop)
            for slot, rate in enumerate(split_rate(spec.txn.rate, spec.txn.processes))
        ]
        self.input_producers: list[ProducerWorker] = []
        if self.ctp:
            producer_config(spec.producer, bootstrap, "validate")
            flush_s = spec.producer.delivery_timeout_ms / 1000 + 2
            self.input_producers = [
                ProducerWorker(
                    spec, bootstrap, history, self.processes, self.values, rate,
                    self._stop_input, flush_s,
                )
                for rate in split_rate(spec.producer.rate, spec.producer.workers)
            ]  # fmt: skip
        self.sampler = ClusterSampler(
            probe or admin_probe(bootstrap, spec.topic.name),
            Path(run_dir) / CLUSTER_STATE,
            history.elapsed_ns,
            1.0,
        )
        self._meter = RateMeter()
        self.display = ProgressDisplay(self._snapshot, live=live)
        self._crasher = threading.Thread(target=self._crash_loop, name="crasher", daemon=True)
        self._started = 0.0
        self._duration = 0.0

    def topics(self) -> list[str]:
        """Every topic this workload writes: the final drain reads them all."""
        return [self.spec.topic.name, output_topic(self.spec.topic.name)] if self.ctp else [
            self.spec.topic.name
        ]  # fmt: skip

    def start(self) -> None:
        if self.ctp:
            out = replace(self.spec.topic, name=output_topic(self.spec.topic.name))
            admin.create_topic(self.bootstrap, out, timeout_s=60)
        self._started = time.monotonic()
        self.sampler.start()
        for w in self.workers:
            w.start()
        for p in self.input_producers:
            p.start()
        if self.spec.consumer.crash_interval_s:
            self._crasher.start()
        self.display.start()

    def stop(self, hurry: bool = False) -> TxnSummary:
        """Stop the input producers, then let each process finish its transaction (bounded)."""
        stuck: list[str] = []
        self._stop_crasher.set()
        self._stop_input.set()
        self._duration = time.monotonic() - self._started
        for p in self.input_producers:
            if hurry:
                p.flush_timeout_s = min(p.flush_timeout_s, 3.0)
            if not p.join(p.flush_timeout_s + 5):
                stuck.append(f"producer {p.process}")
        self._stop.set()
        # A transaction in flight ends within its calls' bounds: a few of them.
        bound = 2.0 if hurry else 4 * (self.spec.txn.client_timeout_s + 5)
        deadline = time.monotonic() + bound
        for w in self.workers:
            if not w.join(max(0.1, deadline - time.monotonic())):
                stuck.append(f"txn process {w.process}")
        if self._crasher.is_alive():
            self._crasher.join(2.0)
        self.sampler.stop()
        self.display.stop()
        summary = self.summary(stuck)
        (log.warning if summary.rate_shortfall else log.info)("workload: %s", summary)
        return summary

    def final_drain(self, timeout_s: float) -> list[DrainResult]:
        """Read every topic the workload wrote, read_committed, up to its high watermarks."""
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
            (log.info if result.complete else log.warning)("%s: %s", topic, result)
            results.append(result)
        return results

    def _crash_loop(self) -> None:
        rng = random.Random(self.spec.seed)
        interval = float(self.spec.consumer.crash_interval_s or 0)
        while not self._stop_crasher.wait(interval):
            victim = rng.choice(self.workers)
            victim.request_crash(f"client failover: scheduled crash every {interval:g}s")

    def summary(self, stuck: list[str] | None = None) -> TxnSummary:
        s = [w.stats for w in self.workers]
        duration = self._duration or (time.monotonic() - self._started)
        done = sum(x.ok + x.fail + x.info for x in s)
        achieved = done / duration if duration > 0 else 0.0
        shortfall, message = rate_verdict(self.spec.txn.rate, achieved)
        return TxnSummary(
            duration_s=duration,
            txns_ok=sum(x.ok for x in s),
            txns_fail=sum(x.fail for x in s),
            txns_info=sum(x.info for x in s),
            client_aborts=sum(x.client_aborts for x in s),
            sends_committed=sum(x.sends_committed for x in s),
            polls=sum(x.polls for x in s),
            records_read=sum(x.records for x in s),
            seeks=sum(x.seeks for x in s),
            crashes=sum(x.crashes for x in s),
            input_sends_ok=sum(p.stats.ok for p in self.input_producers),
            target_rate=self.spec.txn.rate,
            achieved_rate=achieved,
            rate_shortfall=shortfall,
            rate_message=message.replace("sends/s", "txns/s"),
            workers_stuck=stuck or [],
        )

    def _snapshot(self) -> Snapshot:
        s = self.summary()
        try:
            fault = self.fault_status() or "none"
        except Exception as e:  # the display must not depend on the nemesis being healthy
            fault = f"? ({type(e).__name__})"
        done = s.txns_ok + s.txns_fail + s.txns_info
        return Snapshot(
            elapsed_s=time.monotonic() - self._started,
            sends=done,
            ok=s.txns_ok,
            fail=s.txns_fail,
            info=s.txns_info,
            polls=s.polls,
            records=s.records_read,
            crashes=s.crashes,
            target_rate=s.target_rate,
            rate=self._meter.rate(done),
            fault=fault,
            unit="txns",
        )
