"""Adding a fault is one module: an example kind from outside the product goes all the way.

``testkit.fault_example.Marker`` is registered here and known to no product
file.  Through the registry alone it replays from a recorded run as
``--replay`` reads it, and on a real local cluster (the shared
``kafka_cluster``, or ``KC_NEMESIS_CLUSTER``) applies, heals, and is swept
up by ``heal_cluster`` after a crash.  What needs no cluster (config,
schedules, strategies, model) is tests/unit/test_new_fault_model.py, off the
cluster worker.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _waiting import wait_for
from kafka_chaos.harness.backends import load_cluster
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.history import HistoryWriter, read_history
from kafka_chaos.harness.node import Node, quote
from kafka_chaos.harness.spec import NemesisSpec, TestSpec
from kafka_chaos.nemeses import registry
from kafka_chaos.nemeses import schedule as sch
from kafka_chaos.nemeses.base import FaultOp
from kafka_chaos.nemeses.runner import NemesisRunner, apply, heal_cluster

from kafka_chaos.options import build_spec
from kafka_chaos.run_cli import replay_layer
from testkit.fault_example import NAME, Marker, marker

pytestmark = pytest.mark.integration

TIMEOUT_S = 90.0


@pytest.fixture(scope="module", autouse=True)
def registered() -> Iterator[None]:
    registry.register(Marker())
    try:
        yield
    finally:
        registry.unregister(NAME)


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    name = os.environ.get("KC_NEMESIS_CLUSTER")
    yield load_cluster(name) if name else request.getfixturevalue("kafka_cluster")


# --- on a real cluster ----------------------------------------------------------------------


def exists(node: Node, path: str) -> bool:
    return node.run(f"test -e {quote(path)}", timeout=15, check=False).ok


def run_watched(cluster: Cluster, spec: TestSpec, run_dir: Path) -> sch.Schedule:
    """Run ``spec``'s schedule (one marker fault) and see its marker come and go."""
    run_dir.mkdir()
    spec.save(run_dir / "config.json")  # what makes it a run directory --replay accepts
    with HistoryWriter(run_dir / "history.jsonl") as history:
        runner = NemesisRunner(cluster, spec, history, run_dir)
        [op] = runner.schedule.ops
        node = cluster.node(op.targets[0])
        path = marker(node, op.params["mark"])
        assert not exists(node, path)
        runner.start()
        try:
            wait_for(f"{path} on {node.name}", lambda: exists(node, path), TIMEOUT_S)
            runner.join(spec.time_limit_s + 180)
        finally:
            runner.stop()
    assert not exists(node, path), "the heal left the marker"
    return sch.Schedule.load(run_dir / "schedule.json")


def test_it_applies_heals_and_replays_on_a_real_cluster(cluster: Cluster, tmp_path: Path) -> None:
    # 1-3 s of quiet, then 10 s of fault: exactly one fault fits in 20 s
    nemesis = NemesisSpec(faults=[NAME], interval_s=2.0, duration_s=10.0)
    spec = TestSpec(seed=7, time_limit_s=20.0, nemesis=nemesis)
    first = run_watched(cluster, spec, tmp_path / "first")
    [op] = first.ops
    assert op.error is None and op.applied_s is not None and op.ended_s is not None
    history = list(read_history(tmp_path / "first" / "history.jsonl"))
    assert [(h["f"], h["value"]["phase"]) for h in history] == [(NAME, "start"), (NAME, "end")]
    assert history[0]["value"]["mark"] == op.params["mark"]

    replay = build_spec(replay_layer(tmp_path / "first"), {"time_limit_s": 20.0})
    second = run_watched(cluster, replay, tmp_path / "second")
    assert second.replayed_from == "nemesis.schedule"
    assert second.plan() == first.plan()
    assert second.ops[0].error is None


def test_the_sweep_after_a_crash_removes_it(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    apply(cluster, FaultOp(9101, NAME, 0.0, 1.0, [node.name], params={"mark": "crash"}))
    assert exists(node, marker(node, "crash"))
    done = heal_cluster(cluster)  # as `kafka-chaos heal` does after a SIGKILLed harness
    assert f"{node.name}: removed 1 example marker(s)" in done
    assert not exists(node, marker(node, "crash"))
