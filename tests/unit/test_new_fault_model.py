"""Adding a fault is one module: the example kind, without a cluster.

``testkit.fault_example.Marker`` is registered here and known to no product
file.  Through the registry alone it validates in a config and in a recorded
schedule, appears in generated schedules (and ``kafka-chaos schedule``), is
drawn by the Hypothesis strategies and accepted by their model cluster.  On a
real cluster: tests/integration/test_new_fault.py (these lived there, and ran
on the cluster worker, the full tier's critical path, for no cluster).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import find, given, settings
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.spec import NemesisSpec
from kafka_chaos.nemeses import registry
from kafka_chaos.nemeses import schedule as sch
from kafka_chaos.nemeses.base import FaultOp

from kafka_chaos.cli import main
from kafka_chaos.options import build_spec, load_mapping
from testkit.fault_example import NAME, Marker
from testkit.strategies import ModelCluster, fault_ops, generated_schedules, schedules

NODES = ["n1", "n2", "n3"]


@pytest.fixture(scope="module", autouse=True)
def registered() -> Iterator[None]:
    registry.register(Marker())
    try:
        yield
    finally:
        registry.unregister(NAME)


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
