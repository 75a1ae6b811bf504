"""Execute a fault schedule against a cluster in real time, recording every fault.

One thread walks the schedule (``schedule.steps``): at each fault's time it
resolves the target if needed, writes the history's start line, applies the
fault, and at its end heals it and writes the end line.  ``schedule.json`` is
rewritten after every step, so even a killed harness leaves the realised
schedule of what it did.  Healing is guaranteed twice over: the thread heals
whatever fault is active when it stops (try/finally), and ``heal_all`` sweeps
every node for anything a fault could have left behind.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.fan_out import on_nodes
from kafka_chaos.harness.history import NEMESIS, HistoryWriter
from kafka_chaos.harness.node import Node
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.nemeses import partition, registry, targeting
from kafka_chaos.nemeses.base import FAULT_STEP_TIMEOUT_S, FaultOp, NemesisError
from kafka_chaos.nemeses.kinds import FaultKind
from kafka_chaos.nemeses.schedule import Schedule, for_spec, steps

log = logging.getLogger(__name__)

T = TypeVar("T")

SCHEDULE_FILE = "schedule.json"
# A heal that fails is tried again until this long after its first try: long
# enough to ride out a broker that is slow to restart or a flaky transport,
# short enough that an interrupted run still exits within 30 s.
HEAL_DEADLINE_S = 20.0
HEAL_RETRY_PAUSE_S = 0.5
STOP_JOIN_TIMEOUT_S = HEAL_DEADLINE_S + 5.0


class NemesisRunner:
    """Runs ``spec``'s schedule (generated from the seed, or replayed)."""

    def __init__(
        self,
        cluster: Cluster,
        spec: TestSpec,
        history: HistoryWriter,
        run_dir: Path,
        schedule: Schedule | None = None,
        *,
        schedule_file: str = SCHEDULE_FILE,
        first_id: int = 0,
        group: str | None = None,
    ) -> None:
        """``schedule_file`` and ``first_id``: a second runner of the same run (the
        MirrorMaker node's) keeps its own schedule and numbers its faults apart.
        ``group``: the run's first consumer or share group, what a group- or
        share-coordinator target means by default (the workload declares it)."""
        self.cluster = cluster
        self.group = group
        self.spec = spec
        self.history = history
        self.path = Path(run_dir) / schedule_file
        self.schedule = schedule or for_spec(
            spec.nemesis,
            [n.name for n in cluster.nodes],
            spec.time_limit_s,
            spec.seed,
            spec.topic.name,
        )
        for op in self.schedule.ops:
            op.id += first_id
        self._stop = threading.Event()
        self._stop_heal = threading.Event()  # set when even heal retries must give up
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._active: FaultOp | None = None
        self._t0 = 0.0
        if spec.nemesis.faults and spec.nemesis.schedule is None and not self.schedule.ops:
            # Shown, never hidden: a run asked for faults and gets none.
            log.warning(
                "nemesis: no %s fault fits in this %.0f s run (a gap of ~%.0f s, then %.0f s "
                "of fault); the run has no faults",
                "/".join(spec.nemesis.faults),
                spec.time_limit_s,
                spec.nemesis.interval_s,
                spec.nemesis.duration_s,
            )
        for f in dict.fromkeys(op.f for op in self.schedule.ops):
            kind = registry.find(f)
            if kind is not None:
                kind.check_cluster(cluster)  # refuse up front, never pretend
        if self.schedule.ops:
            # Connect and learn the harness's address on every node now, not on
            # a fault's clock: on a TCG guest a new connection took 10-28 s.
            # Two connections each, because the cluster sampler reads the
            # controller over SSH every second and may hold one when a fault
            # comes.  Best effort: a node unreachable now fails its own fault.
            try:
                on_nodes(
                    cluster.nodes,
                    lambda n: (n.warm(2), partition.harness_address(n)),
                    timeout_s=FAULT_STEP_TIMEOUT_S,
                    what="connecting",
                ).values()
            except Exception as e:  # paramiko's own errors too: opening is not wrapped
                log.warning("nemesis: could not reach every node before the run: %s", e)
        self.schedule.save(self.path)

    # --- public API ------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise NemesisError("nemesis runner already started")
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = STOP_JOIN_TIMEOUT_S) -> None:
        """Stop scheduling; the active fault is healed before this returns."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                self._stop_heal.set()
                log.error("nemesis thread still busy after %ss", timeout_s)

    def join(self, timeout_s: float | None = None) -> None:
        """Wait for the whole schedule to finish (used by tests and replays)."""
        if self._thread is not None:
            self._thread.join(timeout_s)

    def current_fault(self) -> str:
        op = self._active
        if op is None:
            return ""
        return _label(op)

    def heal_all(self) -> None:
        """Undo whatever any fault may have left: partitions, packet faults, clocks, processes."""
        heal_cluster(self.cluster)

    # --- the schedule thread ------------------------------------------------------

    def _run(self) -> None:
        try:
            for step in steps(self.schedule.ops):
                # Both ends keep to the plan: a fault that started late is
                # healed at its planned end, not stretched, and shows as off
                # plan in results.json instead.
                if self._wait_until(step.at_s):
                    break
                if step.phase == "start":
                    self._begin(step.op)
                else:
                    self._finish(step.op)
        except Exception:
            log.exception("nemesis schedule aborted")
        finally:
            try:
                if self._active is not None:
                    self._finish(self._active)
            except Exception:  # heal_all (called by every run's finally) still sweeps
                log.exception("nemesis: healing the active fault failed")
            self._save()

    def _wait_until(self, at_s: float) -> bool:
        """Sleep until ``at_s`` after start; True if a stop was requested."""
        return self._stop.wait(max(0.0, self._t0 + at_s - time.monotonic()))

    def _now(self) -> float:
        return time.monotonic() - self._t0

    def _begin(self, op: FaultOp) -> None:
        op.started_s = self._now()
        with self._lock:
            self._active = op
        try:
            if not op.targets:
                op.resolved = targeting.resolve(
                    self.cluster, op.target, op.params, self.spec.topic.name,
                    self.group,
                )  # fmt: skip
                # a resolved group (the ISR) names its nodes; a leader etc. one node
                op.targets = list(op.resolved.get("nodes") or [op.resolved["node"]])
            prepare([n.name for n in self.cluster.nodes], op)
        except Exception as e:
            op.error = f"{type(e).__name__}: {e}"
        self._record(op, "start")
        if op.error is None:
            try:
                apply(self.cluster, op, self.spec.topic.name)
                op.applied_s = self._now()
                log.info(
                    "fault %s: in effect at %.3f s (planned %.3f s; applying took %.3f s)",
                    _label(op),
                    op.applied_s,
                    op.at_s,
                    op.applied_s - op.started_s,
                )
            except Exception as e:
                op.error = f"{type(e).__name__}: {e}"
                log.warning("fault %s #%s failed to start: %s", op.f, op.id, e)
        self._save()

    def _finish(self, op: FaultOp) -> None:
        extra: dict[str, Any] = {}
        op.healing_s = self._now()
        try:
            outcome = retry_until(
                HEAL_DEADLINE_S * self.cluster.time_scale,
                f"heal of {op.f} #{op.id}",
                self._stop_heal,
                lambda: heal(self.cluster, op),
            )
            if outcome:
                extra.update(outcome)
        except Exception as e:
            extra["heal_error"] = f"{type(e).__name__}: {e}"
            log.warning("fault %s #%s failed to heal: %s", op.f, op.id, e)
        op.ended_s = self._now()
        log.info(
            "fault %s: healed at %.3f s (planned %.3f s; healing took %.3f s)",
            _label(op),
            op.ended_s,
            op.end_s,
            op.ended_s - op.healing_s,
        )
        self._record(op, "end", extra)
        with self._lock:
            self._active = None
        self._save()

    def _record(self, op: FaultOp, phase: str, extra: dict[str, Any] | None = None) -> None:
        value: dict[str, Any] = {**op.params}
        value.update({"phase": phase, "id": op.id, "targets": list(op.targets)})
        # seconds since the schedule started: what was planned, what happened
        realised = op.started_s if phase == "start" else op.ended_s
        value["planned_s"] = round(op.at_s if phase == "start" else op.end_s, 3)
        value["at_s"] = round(realised if realised is not None else self._now(), 3)
        if op.resolved:
            value["resolved"] = op.resolved
        if op.error:
            value["error"] = op.error
        value.update(extra or {})
        self.history.append(NEMESIS, "info", op.f, value)

    def _save(self) -> None:
        try:
            self.schedule.save(self.path)
        except OSError as e:
            log.warning("cannot write %s: %s", self.path, e)


# --- one fault, by its kind -----------------------------------------------------------


class Nemeses:
    """Several runners of one run (dc1's and the MirrorMaker node's) driven as one."""

    def __init__(self, runners: list[NemesisRunner]) -> None:
        self.runners = runners

    def start(self) -> None:
        for r in self.runners:
            r.start()

    def stop(self) -> None:
        for r in self.runners:
            r.stop()

    def heal_all(self) -> None:
        for r in self.runners:
            r.heal_all()

    def current_fault(self) -> str:
        return ", ".join(f for f in (r.current_fault() for r in self.runners) if f)


def prepare(names: list[str], op: FaultOp) -> None:
    """Fix everything still open (e.g. the grudge of a leader isolation) into params.

    After this the op alone says exactly what is done, which is what replay
    reads back.
    """
    kind = registry.find(op.f)
    if kind is not None:
        kind.prepare(names, op)
    if "grudge" in op.params:  # whichever fault carries one, it must name these nodes
        op.params["grudge"] = partition.validate_grudge(op.params["grudge"], names)


def apply(cluster: Cluster, op: FaultOp, topic: str | None = None) -> None:
    nodes = [cluster.node(t) for t in op.targets]  # every target exists before anything is done
    _kind(op).apply(cluster, op, nodes, topic)


def heal(cluster: Cluster, op: FaultOp) -> dict[str, Any] | None:
    """Undo one fault; safe to call even if its start failed halfway."""
    nodes = [cluster.node(t) for t in op.targets]
    kind = registry.find(op.f)
    return None if kind is None else kind.heal(cluster, op, nodes)


def _kind(op: FaultOp) -> FaultKind:
    kind = registry.find(op.f)
    if kind is None:
        raise NemesisError(f"no nemesis implements fault {op.f!r}")
    return kind


def retry_until(
    deadline_s: float, what: str, give_up: threading.Event | None, fn: Callable[[], T]
) -> T:
    """Call ``fn`` until it succeeds or ``deadline_s`` has passed (then re-raise).

    Heals are idempotent, so trying again is always safe; each try is itself
    bounded by its commands' timeouts.
    """
    deadline = time.monotonic() + deadline_s
    attempt = 1
    while True:
        try:
            return fn()
        except Exception as e:
            if time.monotonic() >= deadline or (give_up is not None and give_up.is_set()):
                raise
            log.warning("%s failed (try %d), trying again: %s", what, attempt, e)
            attempt += 1
            time.sleep(HEAL_RETRY_PAUSE_S)


def heal_cluster(
    cluster: Cluster, every_tag: bool = False, deadline_s: float = HEAL_DEADLINE_S
) -> list[str]:
    """Undo anything any fault may have left, on every node; returns what was done.

    The steps are every registered kind's sweeps (``registry.sweeps``):
    after a crash nothing says which faults were in place.  Nodes are healed
    in parallel and every step is attempted on every node even when another
    fails; a failed step is tried again until ``deadline_s``, and what still
    fails is raised together at the end so none goes unnoticed.
    """
    sweeps = registry.sweeps()
    # Each sweep is retried until its deadline, plus the try under way then.
    backstop_s = len(sweeps) * (deadline_s + FAULT_STEP_TIMEOUT_S)
    deadline_s *= cluster.time_scale  # slow guests (VMs under emulation) take longer

    def heal_node(node: Node) -> tuple[list[str], list[str]]:
        done: list[str] = []
        errors: list[str] = []
        for sweep in sweeps:
            try:
                undo = partial(sweep.undo, cluster, node, every_tag)
                result = retry_until(deadline_s, f"{node.name}: healing {sweep.what}", None, undo)
            except Exception as e:
                errors.append(f"{node.name}: {sweep.what}: {e}")
                continue
            if sweep.done and result:
                done.append(f"{node.name}: {sweep.done.format(result)}")
        return done, errors

    healed = on_nodes(cluster.nodes, heal_node, timeout_s=backstop_s, what="healing")
    outcomes = [o.value for o in healed if o.value is not None]
    errors = [str(o.error) for o in healed.failures()] + [e for _, es in outcomes for e in es]
    if errors:
        raise NemesisError("heal incomplete: " + "; ".join(errors))
    done = [d for ds, _ in outcomes for d in ds]
    for line in done:
        log.info("heal: %s", line)
    return done


def _label(op: FaultOp) -> str:
    """``partition n1,n2,n3 (#0)``: the fault as the progress line names it."""
    return f"{op.f} {','.join(op.targets) or op.target} (#{op.id})"
