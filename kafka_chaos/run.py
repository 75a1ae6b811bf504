"""One chaos run from spec to report.

The data flows one way: spec -> cluster -> workload + nemesis -> history ->
checkers -> results.json -> report.html.  The order of steps is fixed:

1. bring the cluster up, or reuse one;   2. create the topic;
3. run workload and nemesis for the time limit;   4. heal;
5. final drain, then forensics while the cluster answers;   6. collect node logs,
   then forensics on them (forensics/steps.py);
7. Spark check;   8. report.

Healing is guaranteed: it runs in a ``finally`` with SIGINT/SIGTERM turned
into an orderly stop, so Ctrl-C never leaves a partitioned or paused node.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import platform
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka_chaos import slow_guests
from kafka_chaos.checkers.ingest.recorded_rows import RowsRecorder
from kafka_chaos.forensics.steps import Moment, Scene
from kafka_chaos.forensics.steps import at as forensic_steps
from kafka_chaos.guarded import guarded as _guarded
from kafka_chaos.harness import admin, api_versions, broker, distribution, kafka_db
from kafka_chaos.harness import store as store_mod
from kafka_chaos.harness.backends import (
    create_cluster,
    destroy_cluster,
    load_cluster,
    why_not_reusable,
)
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError, HarnessError
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.harness.store import RunDir
from kafka_chaos.lease import cluster_lease
from kafka_chaos.mirror_run import mirror_nemeses, mirrored
from kafka_chaos.nemeses.runner import Nemeses, NemesisRunner
from kafka_chaos.reports.index import write_index
from kafka_chaos.reports.render import write_report
from kafka_chaos.workloads import client_logs, registry, share_watch
from kafka_chaos.workloads.java.share_probe import PROBE_TIMEOUT_S
from kafka_chaos.workloads.sampler import cluster_probe

log = logging.getLogger(__name__)

VERDICT_EXIT = {"valid": 0, "invalid": 1, "unknown": 2}
EXIT_HARNESS_ERROR = 3
EXIT_INTERRUPTED = 130
HEALTHY_TIMEOUT_S = 120.0
# The end-of-run heal restarts killed brokers; every step has its own bound
# (nemeses.runner.HEAL_DEADLINE_S), and past this the whole is stuck, not slow.
HEAL_WATCHDOG_S = 60.0


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


class _Signals:
    """SIGINT/SIGTERM set ``stop``; outside the workload phase they also abort.

    While workload and nemesis run, the main loop watches ``stop`` and ends
    the phase itself (``_end_phase``: heal beside the workload's stop).
    Before and after it (bring-up, drain, log collection) nothing watches,
    so the signal raises
    ``_Interrupted`` in the main thread instead of waiting minutes for a step
    to end by itself.
    """

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.watched = False

    def __call__(self, signum: int, _frame: Any) -> None:
        first = not self.stop.is_set()
        self.stop.set()
        if first:
            log.warning(
                "received %s: stopping the run and healing the cluster",
                signal.Signals(signum).name,
            )
        if not self.watched and first:
            raise _Interrupted(signal.Signals(signum).name)


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[_Signals]:
    """Route SIGINT/SIGTERM to a ``_Signals``; restore the handlers after."""
    handler = _Signals(stop)
    if threading.current_thread() is not threading.main_thread():
        yield handler
        return
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield handler
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
    clients = {"kafka_clients": spec.cluster.kafka_version} if spec.java_client else {}
    if spec.cluster.broker != broker.DEFAULT:  # Kafka's version: its tools ask the brokers
        from kafka_chaos.harness import tansu_build

        clients.update(broker=spec.cluster.broker, tansu=tansu_build.TANSU_VERSION)
    return {
        **clients,  # the Java client's jar is the cluster's version (workloads/java/jvm.py)
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
                broker.of(cluster).stop_cluster(cluster, kafka_db.CLUSTER_STOP_GRACE_S)
            destroy_cluster(want.name)
            cluster = None
    if cluster is None:
        log.info(
            "creating %s cluster %r (%d nodes, %s, Kafka %s %s)",
            want.backend,
            want.name,
            want.nodes,
            want.broker,
            want.kafka_version,
            want.mode,
        )
        cluster = create_cluster(want)
    broker.named(want.broker).start_cluster(cluster, want)
    return cluster


def refuse_missing_apis(cluster: Cluster, spec: TestSpec) -> None:
    """Refuse, in one line, a run whose broker lacks an API it needs, by the brokers'
    own ApiVersions answer (harness/api_versions.py), before any client starts:
    otherwise the run would hang or fail mid-way with a client's error."""
    c = spec.cluster
    key = {"kafka": c.kafka_tarball or c.kafka_version, "mode": c.mode,
           "nodes": c.nodes, "broker_config": dict(c.broker_config)}  # fmt: skip
    if c.broker != broker.DEFAULT:  # a key as before for Kafka: its kept answers still serve
        key["broker"] = c.broker
    dist = distribution.for_spec(c.kafka_version, c.kafka_tarball)
    brokers = api_versions.remembered(cluster.state_dir, key, dist, cluster.bootstrap_servers())
    what = f"the {spec.workload} workload with these settings"
    refused = api_versions.refusal(brokers, registry.capabilities(spec), what)
    if refused:
        raise ConfigError(refused)


def run_test(
    spec: TestSpec,
    store: Path = store_mod.DEFAULT_STORE,
    on_progress: Any = None,
) -> RunOutcome:
    """Execute one run; always heals, always leaves a readable run directory."""
    registry.validate(spec.workload, spec)  # before anything is created
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
        try:
            interrupted = _execute(run_spec, run)
        except _Interrupted:
            interrupted = True
        if interrupted:
            return RunOutcome(run, None, None, interrupted=True)
        results = _check(run, spec)
        _forensics(Moment.CHECKED, Scene(run.path, run_spec, topic_name))
        report = _report(run, store)
        verdict = results["verdict"]
        held = None if spec.expected_verdict is None else verdict == spec.expected_verdict
        return RunOutcome(run, verdict, report, expectation_held=held)
    except HarnessError as e:
        log.error("run failed: %s", e)
        raise
    except Exception:
        log.exception("run failed")  # the trace goes to harness.log; the CLI prints one line
        raise
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()


def _record_features(cluster: Cluster, run: RunDir) -> None:
    """Add the cluster's finalized features to config.json (a transactional run's
    protocol depends on ``transaction.version``); a failure is logged, not fatal."""
    try:
        features = kafka_db.finalized_features(cluster)
    except HarnessError as e:
        log.warning("could not read the cluster's finalized features: %s", e)
        return
    path = run.file(store_mod.CONFIG)
    config = json.loads(path.read_text())
    config["cluster_features"] = features
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    log.info("finalized features: %s", ", ".join(f"{k}={v}" for k, v in sorted(features.items())))


def _history_writer(run: RunDir) -> HistoryWriter:
    """history.jsonl, with its Parquet rows written beside it as the run goes,
    so the check starts from them (checkers/ingest/recorded_rows.py)."""
    path = run.file(store_mod.HISTORY)
    return HistoryWriter(path, mirror=RowsRecorder(path))


def _execute(spec: TestSpec, run: RunDir) -> bool:
    """Steps 1-6. Returns True when interrupted by a signal."""
    stop = threading.Event()
    with _stop_on_signals(stop) as signals, cluster_lease(spec.cluster.name, run.path):
        cluster = ensure_cluster(spec)
        refuse_missing_apis(cluster, spec)
        spec = _for_guest_speed(spec, cluster.time_scale, run)
        clock: Callable[[], int] | None = None  # the history's, once it is open
        try:
            impl = broker.of(cluster)
            impl.set_debug_loggers(cluster, spec.debug.broker)
            bootstrap = cluster.bootstrap_servers()
            admin.create_topic(bootstrap, spec.topic, timeout_s=60)
            impl.wait_healthy(cluster, HEALTHY_TIMEOUT_S, topic=spec.topic.name)
            if registry.declared(spec.workload).records_features:
                _record_features(cluster, run)
            with (
                mirrored(cluster, spec, run) as pair,
                _history_writer(run) as history,
                client_logs.kept(run.path, spec.debug),
            ):
                clock = history.elapsed_ns
                nemesis = Nemeses(
                    [
                        NemesisRunner(
                            cluster, spec, history, run.path, group=registry.first_group(spec)
                        ),
                        *mirror_nemeses(pair, spec, history, run.path),
                    ]
                )
                workload = registry.create(
                    spec,
                    bootstrap,
                    history,
                    run.path,
                    fault_status=nemesis.current_fault,
                    probe=cluster_probe(cluster, spec.topic.name),
                )
                watch = share_watch.for_run(
                    spec, bootstrap, history, run.path, getattr(workload, "processes", None)
                )
                signals.watched = True
                try:
                    workload.start()
                    if watch is not None:
                        watch.start()
                    nemesis.start()
                    deadline = time.monotonic() + spec.time_limit_s
                    while not stop.is_set() and time.monotonic() < deadline:
                        stop.wait(min(1.0, max(0.0, deadline - time.monotonic())))
                finally:
                    _end_phase(nemesis, workload, stop.is_set(), cluster.time_scale)
                    signals.watched = False
                try:
                    if stop.is_set():
                        return True
                    impl.wait_healthy(cluster, HEALTHY_TIMEOUT_S, topic=spec.topic.name)
                    drain = workload.final_drain(spec.final_drain_timeout_s)
                    log.info("final drain: %s", drain)
                finally:
                    if watch is not None:  # the share drain is watched too
                        _guarded("stop the share stall watch", watch.stop, PROBE_TIMEOUT_S + 5)
                _forensics(
                    Moment.LIVE, Scene(run.path, spec, spec.topic.name, cluster, history.elapsed_ns)
                )
        finally:
            signals.watched = True  # a second signal must not cut the clean-up short
            _collect_logs(cluster, run)
            _forensics(Moment.LOGS, Scene(run.path, spec, spec.topic.name, clock=clock))
            if spec.debug.broker:
                _guarded(
                    "restore the brokers' log config",
                    broker.of(cluster).set_debug_loggers, cluster, [],
                )  # fmt: skip
            _guarded(
                "delete topic",
                admin.delete_topic,
                cluster.bootstrap_servers(),
                spec.topic.name,
                timeout_s=10 if stop.is_set() else 30,
            )
            cluster.close()
    return False


def _forensics(moment: Moment, scene: Scene) -> None:
    """The forensic steps of ``moment`` (forensics/steps.py), each guarded: one
    that fails is logged and costs only its own file."""
    for step in forensic_steps(moment, scene):
        _guarded(step.name, step.do, scene)


def _end_phase(nemesis: Any, workload: Any, hurry: bool, time_scale: float = 1.0) -> None:
    """End faults and workload together, each bounded.

    The heal runs beside the workload's stop, not after it: sends stop at the
    time limit whatever the faults do, and a fault still active then is
    healed at once rather than after the producers' flush.
    """

    def end_faults() -> None:
        _guarded("stop nemesis", nemesis.stop)
        _guarded("heal", nemesis.heal_all)

    healer = threading.Thread(target=end_faults, name="end faults", daemon=True)
    healer.start()
    summary = _guarded("stop workload", workload.stop, hurry=hurry)
    if summary is not None:
        log.info("workload summary: %s", summary)
    watchdog_s = HEAL_WATCHDOG_S * time_scale  # slow guests heal slowly
    healer.join(watchdog_s)
    if healer.is_alive():
        log.error("healing still running after %.0fs; going on without it", watchdog_s)


def _collect_logs(cluster: Cluster, run: RunDir) -> None:
    impl = broker.of(cluster)
    for node in [*cluster.nodes, *cluster.storage]:
        dest = run.file(store_mod.LOGS) / node.name
        dest.mkdir(parents=True, exist_ok=True)
        _guarded(f"collect logs from {node.name}", impl.collect_logs, node, dest)


def _for_guest_speed(spec: TestSpec, scale: float, run: RunDir) -> TestSpec:
    """``spec`` with client timeouts scaled for slow guests (kafka_chaos.slow_guests);
    config.json records the scaled bounds, which the checks then judge by."""
    if scale <= 1.0:
        return spec
    log.info(
        "guests run %.1fx slower than the host: client timeouts scaled (%s)",
        scale,
        ", ".join(key for _, key in slow_guests.CLIENT_TIMEOUTS),
    )
    saved = run.read_json(store_mod.CONFIG)
    run.file(store_mod.CONFIG).write_text(
        json.dumps(slow_guests.scale_config(saved, scale), indent=2, sort_keys=True) + "\n"
    )
    return TestSpec.from_dict(slow_guests.scale_config(spec.to_dict(), scale))


def _check(run: RunDir, spec: TestSpec) -> dict[str, Any]:
    from kafka_chaos.checkers.api import check_history  # Spark import only when actually checking

    config = run.read_json(store_mod.CONFIG)
    return check_history(
        run.file(store_mod.HISTORY),
        config,
        out=run.file(store_mod.RESULTS),
        spark_master=spec.checker.spark_master,
        spark_remote=spec.checker.spark_remote,
    )


def _report(run: RunDir, store: Path) -> Path:
    report = write_report(run.path)
    _guarded("write store index", write_index, store)
    return report


def _log_to(path: Path) -> logging.Handler:
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    return handler
