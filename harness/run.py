"""One chaos run from spec to report.

The data flows one way: spec -> cluster -> workload + nemesis -> history ->
checkers -> results.json -> report.html.  The order of steps is fixed:

1. bring the cluster up, or reuse one;   2. create the topic;
3. run workload and nemesis for the time limit;   4. heal;
5. final drain;   6. collect node logs;   7. Spark check;   8. report.

Healing is guaranteed: it runs in a ``finally`` with SIGINT/SIGTERM turned
into an orderly stop, so Ctrl-C never leaves a partitioned or paused node.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import platform
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import store as store_mod
from harness.cluster import Cluster
from harness.errors import HarnessError
from harness.spec import TestSpec
from harness.store import RunDir

log = logging.getLogger(__name__)

VERDICT_EXIT = {"valid": 0, "invalid": 1, "unknown": 2}
EXIT_HARNESS_ERROR = 3
EXIT_INTERRUPTED = 130
HEALTHY_TIMEOUT_S = 120.0
# The end-of-run heal restarts killed brokers; past this it is stuck, not slow.
HEAL_WATCHDOG_S = 300.0


@dataclass
class RunOutcome:
    run_dir: RunDir
    verdict: str | None  # None when the run never got to a verdict
    report: Path | None
    interrupted: bool = False
    expectation_held: bool | None = None

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.verdict is None:
            return EXIT_HARNESS_ERROR
        return VERDICT_EXIT[self.verdict]


class _Interrupted(Exception):
    """Raised in the main thread when SIGINT/SIGTERM asks the run to stop."""


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Turn SIGINT/SIGTERM into ``stop`` being set; restore handlers after."""

    def handler(signum: int, _frame: Any) -> None:
        log.warning(
            "received %s: stopping the run and healing the cluster", signal.Signals(signum).name
        )
        stop.set()

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def versions(spec: TestSpec) -> dict[str, str]:
    """Record every version that could explain a difference between runs."""
    import confluent_kafka

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    try:
        import pyspark

        spark = pyspark.__version__
    except ImportError:  # pragma: no cover - pyspark is a hard dependency
        spark = "missing"
    return {
        "kafka": spec.cluster.kafka_version,
        "kafka_mode": spec.cluster.mode,
        "harness": _harness_version(),
        "python": platform.python_version(),
        "java": (java.stderr or java.stdout).splitlines()[0] if java.returncode == 0 else "?",
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
        "pyspark": spark,
    }


def _harness_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kafka-chaos")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


def ensure_cluster(spec: TestSpec) -> Cluster:
    """Reuse a running cluster of the same shape, else (re)create it."""
    from harness import distribution, kafka_db
    from harness.backends import (
        create_cluster,
        destroy_cluster,
        load_cluster,
        why_not_reusable,
    )

    want = spec.cluster
    # Fetch Kafka before touching any node: an unfetchable version must fail
    # fast and leave nothing behind.
    distribution.for_spec(want.kafka_version, want.kafka_tarball)
    try:
        cluster = load_cluster(want.name)
    except HarnessError:
        cluster = None
    if cluster is not None:
        reason = why_not_reusable(cluster, want)
        if reason:
            log.info("recreating cluster %r: %s", want.name, reason)
            with contextlib.suppress(Exception):
                kafka_db.stop_cluster(cluster)
            destroy_cluster(want.name)
            cluster = None
    if cluster is None:
        log.info(
            "creating %s cluster %r (%d nodes, Kafka %s %s)",
            want.backend,
            want.name,
            want.nodes,
            want.kafka_version,
            want.mode,
        )
        cluster = create_cluster(want)
    kafka_db.start_cluster(cluster, want)
    return cluster


def run_test(
    spec: TestSpec,
    store: Path = store_mod.DEFAULT_STORE,
    on_progress: Any = None,
) -> RunOutcome:
    """Execute one run; always heals, always leaves a readable run directory."""
    store = Path(store)
    run = store_mod.new_run_dir(store, spec.name)
    handler = _log_to(run.file(store_mod.HARNESS_LOG))
    started = datetime.now(UTC)
    topic_name = f"{spec.topic.name}-{run.run_id}".replace("T", "t").lower()
    run_spec = dataclasses.replace(spec, topic=dataclasses.replace(spec.topic, name=topic_name))
    spec.save(
        run.file(store_mod.CONFIG),
        extra={
            "versions": versions(spec),
            "started_at": started.isoformat(),
            "topic_name_used": topic_name,
        },
    )
    store_mod.point_latest(store, run)
    log.info("run directory %s", run.path)
    try:
        interrupted = _execute(run_spec, run)
        if interrupted:
            return RunOutcome(run, None, None, interrupted=True)
        results = _check(run, spec)
        report = _report(run, store)
        verdict = results["verdict"]
        held = None if spec.expected_verdict is None else verdict == spec.expected_verdict
        return RunOutcome(run, verdict, report, expectation_held=held)
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()


def _execute(spec: TestSpec, run: RunDir) -> bool:
    """Steps 1-6. Returns True when interrupted by a signal."""
    from harness import admin, kafka_db
    from nemeses.runner import NemesisRunner
    from workloads.history import HistoryWriter
    from workloads.queue import QueueWorkload
    from workloads.sampler import cluster_probe

    stop = threading.Event()
    with _stop_on_signals(stop):
        cluster = ensure_cluster(spec)
        try:
            bootstrap = cluster.bootstrap_servers()
            admin.create_topic(bootstrap, spec.topic, timeout_s=60)
            kafka_db.wait_healthy(cluster, timeout_s=HEALTHY_TIMEOUT_S, topic=spec.topic.name)
            with HistoryWriter(run.file(store_mod.HISTORY)) as history:
                nemesis = NemesisRunner(cluster, spec, history, run.path)
                workload = QueueWorkload(
                    spec,
                    bootstrap,
                    history,
                    run.path,
                    fault_status=nemesis.current_fault,
                    probe=cluster_probe(cluster, spec.topic.name),
                )
                try:
                    workload.start()
                    nemesis.start()
                    deadline = time.monotonic() + spec.time_limit_s
                    while not stop.is_set() and time.monotonic() < deadline:
                        stop.wait(min(1.0, max(0.0, deadline - time.monotonic())))
                finally:
                    _guarded("stop nemesis", nemesis.stop)
                    _within(HEAL_WATCHDOG_S, "heal", nemesis.heal_all)
                    summary = _guarded("stop workload", workload.stop)
                    if summary is not None:
                        log.info("workload summary: %s", summary)
                if stop.is_set():
                    return True
                kafka_db.wait_healthy(cluster, timeout_s=HEALTHY_TIMEOUT_S, topic=spec.topic.name)
                drain = workload.final_drain(spec.final_drain_timeout_s)
                log.info("final drain: %s", drain)
        finally:
            _collect_logs(cluster, run)
            _guarded(
                "delete topic",
                admin.delete_topic,
                cluster.bootstrap_servers(),
                spec.topic.name,
                timeout_s=30,
            )
            cluster.close()
    return False


def _collect_logs(cluster: Cluster, run: RunDir) -> None:
    from harness import kafka_db

    for node in cluster.nodes:
        dest = run.file(store_mod.LOGS) / node.name
        dest.mkdir(parents=True, exist_ok=True)
        _guarded(f"collect logs from {node.name}", kafka_db.collect_logs, node, dest)


def _check(run: RunDir, spec: TestSpec) -> dict[str, Any]:
    from checkers.api import check_history

    config = run.read_json(store_mod.CONFIG)
    return check_history(
        run.file(store_mod.HISTORY),
        config,
        out=run.file(store_mod.RESULTS),
        spark_master=spec.checker.spark_master,
    )


def _report(run: RunDir, store: Path) -> Path:
    from reports.index import write_index
    from reports.render import write_report

    report = write_report(run.path)
    _guarded("write store index", write_index, store)
    return report


def _guarded(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run one teardown step; a failure is logged and never stops the others."""
    try:
        return fn(*args, **kwargs)
    except Exception:
        log.exception("%s failed", what)
        return None


def _within(timeout_s: float, what: str, fn: Any) -> None:
    """Run a teardown step on a watchdog thread: if it hangs, log it and go on.

    Every SSH command has its own timeout, yet one end-of-run heal was seen
    hanging past it (paramiko logged "unhandled type 3") while the producers
    kept sending; the run must still stop its workload and finish.
    """
    worker = threading.Thread(target=_guarded, args=(what, fn), name=what, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        log.error("%s still running after %.0fs; going on without it", what, timeout_s)


def _log_to(path: Path) -> logging.Handler:
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    return handler
