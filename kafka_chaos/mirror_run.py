"""A disaster-recovery run's second cluster and MirrorMaker, around the run's own steps.

``kafka_chaos.run`` wraps its workload phase in ``mirrored``: when
``mirror.enabled`` it brings up dc2 and the MirrorMaker node
(``harness.mirror_pair``), starts MirrorMaker 2 for this run's topic and
groups, and afterwards stops it, keeps dc2's and MirrorMaker's logs with the
run's and deletes the run's topic on dc2.  Runs without a mirror pass
through untouched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

from kafka_chaos.guarded import guarded as _guarded
from kafka_chaos.harness import admin, kafka_db
from kafka_chaos.harness import mirror_maker as mm
from kafka_chaos.harness import store as store_mod
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.mirror_pair import MirrorPair, ensure
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.harness.store import RunDir
from kafka_chaos.nemeses.runner import NemesisRunner
from kafka_chaos.workloads import mirror_spec
from kafka_chaos.workloads.cluster_history import ClusterHistory
from kafka_chaos.workloads.mirror import DC2

log = logging.getLogger(__name__)


def groups_pattern(spec: TestSpec) -> str:
    """The run's consumer groups as MirrorMaker's ``groups`` regex (see ``group_name``)."""
    return f"{spec.topic.name}-g[0-9]+"


@contextlib.contextmanager
def mirrored(cluster: Cluster, spec: TestSpec, run: RunDir) -> Iterator[MirrorPair | None]:
    if not mirror_spec.of(spec).enabled:
        yield None
        return
    pair = ensure(cluster, spec.cluster, mirror_spec.of(spec).dc2_nodes)
    node = pair.mm_node
    try:
        dist = mm.configure(
            node, mirror_spec.of(spec), pair.endpoints, spec.topic.name, groups_pattern(spec),
            spec.cluster.kafka_version,
        )  # fmt: skip
        _record_version(run, dist.tools_version or spec.cluster.kafka_version)
        mm.stop(node)  # a previous run's, if one was left
        mm.start(node)
        _wait_mirroring(pair, spec)
        yield pair
    finally:
        _guarded("stop MirrorMaker", mm.stop, node)
        for c in (pair.dc2, pair.mm):
            for n in c.nodes:
                dest = run.file(store_mod.LOGS) / f"{c.name}-{n.name}"
                _guarded(f"collect logs from {c.name} {n.name}", kafka_db.collect_logs, n, dest)
        policy = mirror_spec.of(spec).replication_policy
        for topic in dict.fromkeys([spec.topic.name, mm.remote_topic(spec.topic.name, policy)]):
            _guarded(f"delete dc2 topic {topic}", admin.delete_topic,
                     pair.dc2.bootstrap_servers(), topic, timeout_s=30)  # fmt: skip
        pair.close()


MIRROR_SCHEDULE = "schedule-mirror.json"
MIRROR_FIRST_ID = 100  # the MirrorMaker node's faults are numbered from here
DC2_SCHEDULE = "schedule-dc2.json"
DC2_FIRST_ID = 200  # dc2's own faults are numbered from here


def mirror_nemeses(
    pair: MirrorPair | None, spec: TestSpec, history: HistoryWriter, run_dir: Path
) -> list[NemesisRunner]:
    """The runners for ``mirror.faults`` (the MirrorMaker node) and ``mirror.dc2_faults``
    (dc2's brokers), for those the run has.

    Each is seeded like dc1's schedule (same interval and duration, seed +1
    and +2), so a replay of the run redraws the same faults.  dc2's fault
    lines name their nodes ``dc2/n1``, as its clients' lines name its topics:
    dc1's n1 and dc2's n1 stay apart in the history and the report.
    """
    if pair is None:
        return []
    runners = []
    if mirror_spec.of(spec).faults:
        runners.append(NemesisRunner(
            pair.mm, _schedule_of(spec, mirror_spec.of(spec).faults, 1), history, run_dir,
            schedule_file=MIRROR_SCHEDULE, first_id=MIRROR_FIRST_ID,
        ))  # fmt: skip
    if mirror_spec.of(spec).dc2_faults:
        names = [n.name for n in pair.dc2.nodes]
        dc2_history = ClusterHistory(history, DC2, [spec.topic.name, *names])
        runners.append(NemesisRunner(
            pair.dc2, _schedule_of(spec, mirror_spec.of(spec).dc2_faults, 2), dc2_history, run_dir,
            schedule_file=DC2_SCHEDULE, first_id=DC2_FIRST_ID,
        ))  # fmt: skip
    return runners


def _schedule_of(spec: TestSpec, faults: list[str], seed_offset: int) -> TestSpec:
    """``spec`` with a nemesis of ``faults`` on random targets, drawn from its own seed."""
    nemesis = dataclasses.replace(spec.nemesis, faults=list(faults), schedule=None,
                                  targets="random")  # fmt: skip
    return dataclasses.replace(spec, nemesis=nemesis, seed=spec.seed + seed_offset)


READY_TIMEOUT_S = 90.0


def _wait_mirroring(pair: MirrorPair, spec: TestSpec) -> None:
    """Until MirrorMaker has made dc2's copy of the run's topic: its connectors are up.

    The workload starts only then, so a fault early in the run meets a
    MirrorMaker that is copying, not one still starting (several seconds
    on a loaded machine).  Bounded; a MirrorMaker not ready by then is
    logged and the run goes on, its history showing what it copied.
    """
    remote = mm.remote_topic(spec.topic.name, mirror_spec.of(spec).replication_policy)
    bootstrap = pair.dc2.bootstrap_servers()
    started = time.monotonic()
    deadline = started + READY_TIMEOUT_S * pair.dc2.time_scale
    while time.monotonic() < deadline:
        try:
            if (
                len(admin.describe_topics(bootstrap, [remote], timeout_s=5))
                == spec.topic.partitions
            ):
                log.info("MirrorMaker 2 on %s mirroring after %.1f s", pair.mm.name,
                         time.monotonic() - started)  # fmt: skip
                return
        except Exception as e:  # not there yet
            log.debug("dc2 %s: %s", remote, e)
        time.sleep(1.0)
    log.warning("MirrorMaker 2 had not created dc2's %s after %.0f s; running anyway", remote,
                time.monotonic() - started)  # fmt: skip


def _record_version(run: RunDir, version: str) -> None:
    """config.json's versions name the MirrorMaker release (it may be older than the brokers)."""
    path = run.file(store_mod.CONFIG)
    config = json.loads(path.read_text())
    config.setdefault("versions", {})["mirror_maker"] = version
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
