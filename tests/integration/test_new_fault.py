"""Adding a fault is one module: an example kind from outside the product goes all the way.

``_fault_example.Marker`` is registered here and known to no product file.
Through the registry alone it validates in a config and in a recorded
schedule, appears in generated schedules (and ``kafka-chaos schedule``),
is drawn by the Hypothesis strategies and accepted by their model cluster,
replays from a recorded run as ``--replay`` reads it, and on a real local
cluster (the shared ``kafka_cluster``, or ``KC_NEMESIS_CLUSTER``) applies,
heals, and is swept up by ``heal_cluster`` after a crash.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _fault_example import NAME, Marker, marker
from _waiting import wait_for
from hypothesis import find, given, settings

from harness.backends import load_cluster
from harness.cluster import Cluster
from harness.errors import ConfigError
from harness.node import Node, quote
from harness.spec import NemesisSpec, TestSpec
from kafka_chaos.cli import main
from kafka_chaos.options import build_spec, load_mapping
from kafka_chaos.run_cli import replay_layer
from nemeses import registry
from nemeses import schedule as sch
from nemeses.base import FaultOp
from nemeses.runner import NemesisRunner, apply, heal_cluster
from testkit.strategies import ModelCluster, fault_ops, generated_schedules, schedules
from workloads.history import HistoryWriter, read_history

pytestmark = pytest.mark.integration

NODES = ["n1", "n2", "n3"]
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


# --- no cluster needed ------------------------------------------------------------------


def test_it_validates_in_a_config_and_in_a_recorded_schedule(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"nemesis:\n  faults: [kill, {NAME}]\n  targets: leader\n")
    spec = build_spec(load_mapping(config))
    assert spec.nemesis.faults == ["kill", NAME]
    sch.validate_nemesis(spec.nemesis)
    op = {"id": 0, "f": NAME, "at_s": 1, "duration_s": 2, "targets": ["n1"]}
    assert sch.Schedule.from_dict([op]).ops[0].params == {"mark": "default"}
    with pytest.raises(ConfigError, match=rf"ops\[0\]: {NAME} mark must be"):
        sch.Schedule.from_dict([{**op, "params": {"mark": "Not A Mark"}}])
    with pytest.raises(ConfigError, match=r"has no param\(s\) \['colour'\]"):
        sch.Schedule.from_dict([{**op, "params": {"colour": "red"}}])


def test_it_appears_in_generated_schedules(capsys: pytest.CaptureFixture[str]) -> None:
    spec = NemesisSpec(faults=["kill", NAME], interval_s=2.0, duration_s=3.0)
    s = sch.generate(spec, NODES, 120, seed=5)
    mine = [op for op in s.ops if op.f == NAME]
    assert mine and len(mine) < len(s.ops)
    assert all(len(op.targets) == 1 and op.params["mark"].startswith("m") for op in mine)
    assert sch.generate(spec, NODES, 120, seed=5).plan() == s.plan()
    leader = NemesisSpec(faults=[NAME], targets="leader", interval_s=1.0)
    for op in sch.generate(leader, NODES, 30, seed=1, topic="t").ops:
        assert op.targets == [] and op.target == "leader" and "topic" not in op.params
    assert main(["schedule", "--faults", NAME, "--seed", "3", "--json"]) == 0
    assert {op["f"] for op in json.loads(capsys.readouterr().out)["ops"]} == {NAME}


def test_the_model_accepts_it_and_the_strategies_draw_it() -> None:
    model = ModelCluster(NODES)
    op = FaultOp(0, NAME, 0.0, 1.0, ["n2"])
    model.start(op)
    assert model.broken() == ["n2 marked"]
    model.end(op)
    assert model.broken() == []
    model.start(op)
    model.heal_all()  # what its sweep does after a crash
    assert model.broken() == []
    assert find(fault_ops(NODES, 0.0, 0), lambda o: o.f == NAME).f == NAME
    assert find(generated_schedules(), lambda s: any(o.f == NAME for o in s.ops))


@settings(max_examples=100, deadline=None)
@given(s=schedules())
def test_schedules_with_it_heal_everything_they_break(s: sch.Schedule) -> None:
    model = ModelCluster(s.nodes, leader=s.nodes[-1])
    model.run(s, final_heal=False)
    assert model.broken() == []
    crashed = ModelCluster(s.nodes)
    for op in s.ops:  # a harness that died: no fault's own heal ran
        crashed.start(FaultOp.from_dict(op.plan()))
    crashed.heal_all()
    assert crashed.broken() == []


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
