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
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from kafka_chaos.harness import admin
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.spec import TestSpec, replace
from kafka_chaos.workloads import txn_spec
from kafka_chaos.workloads.drain import DrainResult
from kafka_chaos.workloads.lifecycle import Lifecycle, per_second, rate_verdict
from kafka_chaos.workloads.producer import Pacer, ProducerWorker, split_rate
from kafka_chaos.workloads.progress import Progress
from kafka_chaos.workloads.txn_client import (
    CTP,
    Teardown,
    TxnClient,
    TxnStats,
    output_topic,
    validate,
)
from kafka_chaos.workloads.values import Counter
from kafka_chaos.workloads.worker import RESTART_PAUSE_S, Slot

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
        self.client_class = TxnClient
        if spec.producer.client == "java":
            from kafka_chaos.workloads.java.txn_client import JavaTxnClient  # JPype only when asked

            self.client_class = JavaTxnClient

    def _run(self) -> None:
        pacer = Pacer(self.rate)
        while not self.stop_event.is_set():
            self.process = self.processes.next()
            client = None
            crashed = True  # until the incarnation ends by the stop event
            try:
                client = self.client_class(
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
            except (KafkaException, ConfigError) as e:
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


def _refused_config(e: Exception) -> bool:
    """A client constructor refused its settings: the same on every retry."""
    if isinstance(e, ConfigError):
        return True
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

    def progress(self) -> Progress:
        done = self.txns_ok + self.txns_fail + self.txns_info
        return Progress(
            done, self.txns_ok, self.txns_fail, self.txns_info,
            self.polls, self.records_read, self.crashes, self.target_rate,
        )  # fmt: skip


class TxnWorkload(Lifecycle[TxnSummary]):
    """Transactional processes; in ctp mode also the plain producers of their input."""

    check_config = staticmethod(validate)
    unit = "txns"
    slot_kind = "txn process"
    failover = "client failover"
    ctp: bool  # consume-transform-produce: plain producers fill the input
    workers: list[TxnWorker]
    input_producers: list[ProducerWorker]

    def build_clients(self) -> None:
        validate(self.spec)
        if self.spec.producer.client == "java":  # its settings' errors now, not in a thread
            from kafka_chaos.workloads.java.txn_client import java_txn_producer_properties

            java_txn_producer_properties(self.spec, self.bootstrap, 0, 0)
        txn = txn_spec.of(self.spec)
        self.ctp = txn.mode == CTP
        self.workers = [
            TxnWorker(
                self.spec, self.bootstrap, self.history, self.processes, self.values,
                slot, rate, self.stop_slots,
            )
            for slot, rate in enumerate(split_rate(txn.rate, txn.processes))
        ]  # fmt: skip
        self.input_producers = self.plain_producers() if self.ctp else []
        self.senders, self.slots = self.input_producers, self.workers

    def topics(self) -> list[str]:
        """The run's topic and, in ctp mode, the output topic the processes copy it to."""
        name = self.spec.topic.name
        return [name, output_topic(name)] if self.ctp else [name]

    def prepare(self) -> None:
        """The output topic exists before any process writes to it."""
        if self.ctp:
            out = replace(self.spec.topic, name=output_topic(self.spec.topic.name))
            admin.create_topic(self.bootstrap, out, timeout_s=60)

    def slot_bound(self, hurry: bool) -> float:
        """A transaction in flight ends within its calls' bounds: a few of them."""
        return 2.0 if hurry else 4 * (txn_spec.of(self.spec).client_timeout_s + 5)

    def final_drain(self, timeout_s: float) -> list[DrainResult]:
        """Read every topic the workload wrote, read_committed, up to its high watermarks."""
        return self.drain_topics(timeout_s)

    def summary(self, stuck: list[str] | None = None) -> TxnSummary:
        s = [w.stats for w in self.workers]
        duration = self.duration_s()
        done = sum(x.ok + x.fail + x.info for x in s)
        achieved = per_second(done, duration)
        shortfall, message = rate_verdict(txn_spec.of(self.spec).rate, achieved, self.unit)
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
            target_rate=txn_spec.of(self.spec).rate,
            achieved_rate=achieved,
            rate_shortfall=shortfall,
            rate_message=message,
            workers_stuck=stuck or [],
        )
