"""Seeded schedule generation, combinators, schedule.json round trips, replay."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.spec import NemesisSpec
from kafka_chaos.nemeses import registry
from kafka_chaos.nemeses import schedule as sch
from kafka_chaos.nemeses.base import FaultOp

from testkit.strategies import ModelCluster, generated_schedules, schedules

NODES = ["n1", "n2", "n3", "n4", "n5"]
ALL = NemesisSpec(faults=list(registry.names()), interval_s=5.0, duration_s=4.0)


def test_same_seed_same_schedule():
    a = sch.generate(ALL, NODES, 300, seed=1234, topic="t")
    b = sch.generate(ALL, NODES, 300, seed=1234, topic="t")
    assert a.to_dict() == b.to_dict()
    assert len(a.ops) > 10


def test_different_seeds_differ():
    plans = {json.dumps(sch.generate(ALL, NODES, 300, seed=s).plan()) for s in range(20)}
    assert len(plans) == 20


def test_generation_never_touches_global_random():
    random.seed(1)
    before = random.random()
    random.seed(1)
    sch.generate(ALL, NODES, 300, seed=5)
    assert random.random() == before


def test_schedule_round_trips_through_schedule_json(tmp_path):
    s = sch.generate(ALL, NODES, 120, seed=99, topic="t")
    s.ops[0].started_s, s.ops[0].ended_s = 3.5, 7.25  # realised fields survive too
    s.ops[0].resolved = {"node": "n2"}
    path = tmp_path / "schedule.json"
    s.save(path)
    back = sch.Schedule.load(path)
    assert back.to_dict() == s.to_dict()
    assert back.seed == 99 and back.nodes == NODES


def test_replay_keeps_plan_and_resolved_targets_and_drops_results(tmp_path):
    leader = NemesisSpec(faults=["kill", "partition"], targets="leader", interval_s=2, duration_s=3)
    s = sch.generate(leader, NODES, 30, seed=3, topic="t")
    assert s.ops and all(op.targets == [] for op in s.ops)
    for op in s.ops:  # what a run does: resolve, and record when
        op.targets, op.resolved, op.started_s, op.ended_s = ["n4"], {"node": "n4"}, op.at_s, 1.0
    s.save(tmp_path / "schedule.json")
    replay = sch.replay_of(sch.Schedule.load(tmp_path / "schedule.json"), "x")
    assert [op.targets for op in replay.ops] == [["n4"]] * len(s.ops)
    assert [op.at_s for op in replay.ops] == [op.at_s for op in s.ops]
    assert all(op.started_s is None and op.resolved is None for op in replay.ops)
    assert replay.plan() == [{**p, "targets": ["n4"]} for p in sch.Schedule(s.ops).plan()]


def test_spec_schedule_overrides_generation():
    recorded = sch.generate(ALL, NODES, 60, seed=8)
    spec = NemesisSpec(faults=["pause"], schedule=[op.to_dict() for op in recorded.ops])
    got = sch.for_spec(spec, NODES, 60, seed=12345)
    assert got.plan() == recorded.plan()
    assert got.replayed_from == "nemesis.schedule"


def test_replay_on_a_smaller_cluster_names_the_missing_node():
    recorded = sch.generate(NemesisSpec(faults=["kill"]), NODES, 200, seed=2)
    spec = NemesisSpec(schedule=[op.to_dict() for op in recorded.ops])
    with pytest.raises(ConfigError, match="which this cluster lacks"):
        sch.for_spec(spec, ["n1"], 60, seed=1)


def test_no_faults_means_an_empty_schedule():
    assert sch.generate(NemesisSpec(faults=[]), NODES, 60, seed=1).ops == []


@pytest.mark.parametrize(
    "spec, message",
    [
        (NemesisSpec(faults=["explode"]), "unknown fault 'explode'"),
        (NemesisSpec(targets="oldest"), "nemesis.targets: 'oldest'"),
        (NemesisSpec(duration_s=0), "duration_s: must be > 0"),
        (NemesisSpec(interval_s=-1), "interval_s: must be >= 0"),
    ],
)
def test_bad_nemesis_options_are_named(spec, message):
    with pytest.raises(ConfigError, match=message):
        sch.generate(spec, NODES, 60, seed=1)


@pytest.mark.parametrize(
    "ops, message",
    [
        ([{"id": 0, "f": "kill", "at_s": 1, "duration_s": 2}], "no targets"),
        ([{"id": 0, "f": "nuke", "at_s": 1, "duration_s": 2, "targets": ["n1"]}], "unknown fault"),
        ([{"id": 0, "f": "kill", "at_s": 1, "targets": ["n1"]}], "missing 'duration_s'"),
        ([{"id": 0, "f": "kill", "at_s": -1, "duration_s": 1, "targets": ["n1"]}], "at_s must"),
        (
            [{"id": 0, "f": "kill", "at_s": 1, "duration_s": 1, "targets": ["n1"], "x": 1}],
            "unknown fault field",
        ),
        (
            [
                {"id": 0, "f": "kill", "at_s": 1, "duration_s": 5, "targets": ["n1"]},
                {"id": 1, "f": "kill", "at_s": 3, "duration_s": 1, "targets": ["n1"]},
            ],
            "before the previous one ends",
        ),
        (
            [
                {"id": 0, "f": "kill", "at_s": 1, "duration_s": 1, "targets": ["n1"]},
                {"id": 0, "f": "kill", "at_s": 3, "duration_s": 1, "targets": ["n1"]},
            ],
            "duplicate fault id 0",
        ),
        (
            [
                {
                    "id": 0,
                    "f": "netem",
                    "at_s": 1,
                    "duration_s": 1,
                    "targets": [],
                    "target": "leader",
                }
            ],
            "cannot target the leader",
        ),
    ],
)
def test_bad_recorded_schedules_are_named(ops, message):
    with pytest.raises(ConfigError, match=message):
        sch.Schedule.from_dict(ops)


def test_combinators_cycle_phases_and_time_limit():
    ctx = sch.Ctx(tuple(NODES))
    kills_then_pauses = sch.phases(
        sch.time_limit(sch.stagger(sch.fault("kill"), 1.0, 2.0, jitter=0), 9.0),
        sch.time_limit(
            sch.stagger(sch.cycle(sch.fault("pause"), sch.fault("partition")), 1, 1, 0), 6
        ),
    )
    ops = sch.realise(kills_then_pauses, random.Random(0), ctx)
    assert [op.f for op in ops] == ["kill"] * 3 + ["pause", "partition"] * 1 + ["pause"]
    assert [op.at_s for op in ops] == [1, 4, 7, 10, 12, 14]
    assert [op.id for op in ops] == list(range(6))
    sch.validate_sequence(ops)


def test_an_endless_composition_is_refused():
    with pytest.raises(ConfigError, match="add a time limit"):
        sch.realise(sch.stagger(sch.fault("kill"), 1, 1), random.Random(0), sch.Ctx(("n1",)))


def test_leader_targeting_leaves_targets_open_but_rolling_restarts_name_everyone():
    spec = NemesisSpec(faults=["kill", "rolling-restart"], targets="leader", interval_s=1)
    ops = sch.generate(spec, NODES, 200, seed=4, topic="t").ops
    for op in ops:
        if op.f == "kill":
            assert op.targets == [] and op.target == "leader" and op.params == {}
        else:
            assert sorted(op.targets) == NODES


@settings(max_examples=200, deadline=None)
@given(s=generated_schedules())
def test_generated_schedules_are_well_formed_and_heal_everything(s):
    sch.validate_sequence(s.ops)
    assert [op.id for op in s.ops] == list(range(len(s.ops)))
    back = sch.Schedule.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back.plan() == s.plan()
    _assert_heals(s)


@settings(max_examples=200, deadline=None)
@given(s=schedules())
def test_arbitrary_schedules_heal_everything_they_break(s):
    back = sch.Schedule.from_dict(s.to_dict())
    sch.check_nodes(back, s.nodes)
    _assert_heals(s)


def _assert_heals(s: sch.Schedule) -> None:
    # each fault is healed by its own end step, before the next starts ...
    model = ModelCluster(s.nodes, leader=s.nodes[-1])
    for step in sch.steps(s.ops):
        if step.phase == "start":
            assert model.broken() == [], f"fault {step.op.id} starts on a broken cluster"
            model.start(step.op)
        else:
            model.end(step.op)
    assert model.broken() == []
    # ... and the final heal undoes a run cut short in the middle of a fault,
    # even when earlier faults' own heals never ran (a harness that crashed)
    model = ModelCluster(s.nodes, leader=s.nodes[0])
    for op in s.ops:
        model.start(FaultOp.from_dict(op.plan()))
    model.heal_all()
    assert model.broken() == []


def test_schedule_command_prints_the_same_schedule_for_the_same_seed(capsys, tmp_path):
    from kafka_chaos.cli import main

    argv = ["schedule", "--seed", "11", "--faults", "kill,partition", "--json", "--nodes", "5"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert main(argv) == 0
    assert capsys.readouterr().out == first
    (tmp_path / "schedule.json").write_text(first)
    assert main(["schedule", "--file", str(tmp_path / "schedule.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(first)
    assert main(["schedule", "--faults", "bogus"]) == 3
    assert "unknown fault 'bogus'" in capsys.readouterr().err


def test_the_model_sees_a_clock_fault_left_in_place():
    model = ModelCluster(["n1", "n2"])
    op = FaultOp(0, "clock-strobe", 0.0, 1.0, ["n2"], params={"delta_ms": -500})
    model.start(op)
    assert model.broken() == ["n2 strobing", "n2 clock off by -500 ms"]
    model.heal_all()
    assert model.broken() == []


def test_a_replay_acts_on_its_own_runs_topic_not_the_recorded_runs() -> None:
    """Schedules recorded before 2026-11-27 name their run's topic in a leader-targeted
    fault; replayed, an unclean-election waited 40 s for a topic that no longer existed."""
    recorded = [
        {"id": 0, "f": "unclean-election", "at_s": 5, "duration_s": 40, "targets": ["n3"],
         "target": "leader", "params": {"topic": "chaos-20261127t080902z", "partition": 0}},
        {"id": 1, "f": "kill", "at_s": 50, "duration_s": 5, "targets": ["n1"],
         "target": "leader", "params": {"topic": "orders"}},
    ]  # fmt: skip
    spec = NemesisSpec(faults=["kill"], schedule=recorded)
    ops = sch.for_spec(spec, NODES, 60, seed=1).ops
    assert ops[0].params == {"partition": 0} and ops[0].targets == ["n3"]
    assert ops[1].params == {"topic": "orders"}  # a topic the user named stays
