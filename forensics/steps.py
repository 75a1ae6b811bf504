"""The forensic steps a run takes after the heal, declared once, in order.

Why a list and not calls in the run: each step names when it can run (the
cluster still up, the node logs copied, or results.json written), whether
this run wants it, and what it does; ``kafka_chaos.run`` loops over the list
at each moment and guards every step, so one that fails costs its own file
and never the run.  A new step is one entry here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from kafka_chaos.forensics import (
    coordinator_state,
    disk_account,
    probe_logs,
    provenance,
    replica_verify,
)
from kafka_chaos.harness import broker
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.spec import TestSpec


class Moment(Enum):
    """When in the run a step can work."""

    LIVE = "live"  # healed and drained: the cluster still answers
    LOGS = "logs"  # the nodes' logs are copied into the run directory
    CHECKED = "checked"  # results.json is written (a step may cite its counts)


@dataclass
class Scene:
    """What a step may use.  ``cluster`` is None after the LIVE moment; ``clock``
    is the history's (nanoseconds since its start), None when it never opened."""

    run_dir: Path
    spec: TestSpec
    topic: str
    cluster: Cluster | None = None
    clock: Callable[[], int] | None = None


@dataclass(frozen=True)
class Step:
    name: str  # what the harness log says it was doing ("verify replicas")
    moment: Moment
    do: Callable[[Scene], Any]
    wanted: Callable[[Scene], bool] = lambda scene: True


def _live(scene: Scene) -> Cluster:
    assert scene.cluster is not None, "a LIVE step runs with the cluster"
    return scene.cluster


def _clock(scene: Scene) -> Callable[[], int]:
    assert scene.clock is not None, "a LIVE step runs with the history open"
    return scene.clock


def _replica_logs(scene: Scene) -> bool:
    """Whether the cluster's broker keeps replica logs to compare (Kafka does;
    Tansu keeps every record as one row of its storage instead)."""
    impl = broker.of(scene.cluster) if scene.cluster else broker.named(scene.spec.cluster.broker)
    return impl.no_replica_logs is None


STEPS: tuple[Step, ...] = (
    Step(
        "verify replicas",
        Moment.LIVE,
        lambda s: replica_verify.verify(_live(s), s.topic, s.run_dir, _clock(s)),
        wanted=_replica_logs,
    ),
    Step(
        "read the storage's evidence",
        Moment.LIVE,
        lambda s: broker.of(_live(s)).evidence(_live(s), s.topic, s.run_dir),
        wanted=lambda s: not _replica_logs(s),
    ),
    Step(
        "keep the coordinators' state",
        Moment.LIVE,
        lambda s: coordinator_state.keep(_live(s), s.spec, s.run_dir, _clock(s)),
        wanted=lambda s: coordinator_state.wanted(s.spec),
    ),
    Step(
        "account for the disk faults",
        Moment.LOGS,
        lambda s: disk_account.write(s.run_dir, s.topic, s.clock),
    ),
    Step(
        "cut the logs around share probes",
        Moment.LOGS,
        lambda s: probe_logs.cut(s.run_dir, s.topic),
    ),
    Step(
        "trace the lost values",
        Moment.CHECKED,
        lambda s: provenance.write(s.run_dir, s.topic),
        # after the check, as it cites acked-lost's count; only runs with a disk fault
        wanted=lambda s: (s.run_dir / disk_account.RESULT).is_file(),
    ),
)


def at(moment: Moment, scene: Scene) -> Iterator[Step]:
    """The steps this run wants at ``moment``, in their order."""
    return (s for s in STEPS if s.moment is moment and s.wanted(scene))
