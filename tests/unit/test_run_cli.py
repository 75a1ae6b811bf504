"""Replay and reproduce read what a run recorded."""

import json

import pytest
from kafka_chaos.harness import store as store_mod
from kafka_chaos.harness.errors import ConfigError, HarnessError
from kafka_chaos.harness.spec import TestSpec

from kafka_chaos.options import build_spec
from kafka_chaos.run_cli import _anomalies, replay_layer


def recorded_run(tmp_path, schedule, results=None):
    run = store_mod.new_run_dir(tmp_path, "t")
    TestSpec(seed=5).save(run.file("config.json"), extra={"versions": {}})
    run.file("schedule.json").write_text(json.dumps(schedule))
    if results is not None:
        run.file("results.json").write_text(json.dumps(results))
    return run


def test_replay_layer_carries_the_recorded_ops_and_seed(tmp_path):
    ops = [
        {
            "id": 0,
            "f": "kill",
            "at_s": 3.0,
            "duration_s": 4.0,
            "targets": ["n2"],
            "target": "random",
            "params": {},
            "started_s": 3.1,
            "ended_s": 7.2,
        }
    ]
    run = recorded_run(tmp_path, {"format": 1, "seed": 99, "ops": ops})
    spec = build_spec(replay_layer(run.path))
    assert spec.seed == 99
    assert spec.nemesis.schedule == ops


def test_replay_of_a_dir_without_a_schedule_is_named(tmp_path):
    run = recorded_run(tmp_path, {"nope": 1})
    with pytest.raises(ConfigError, match="no 'ops' list"):
        replay_layer(run.path)
    with pytest.raises(HarnessError, match="not a run directory"):
        replay_layer(tmp_path)


def test_anomalies_are_the_error_checks_that_fired(tmp_path):
    results = {
        "checks": {
            "lost-write": {"count": 3, "severity": "error"},
            "duplicate": {"count": 9, "severity": "info"},
            "unseen": {"count": 0, "severity": "error"},
        }
    }
    assert _anomalies(recorded_run(tmp_path, {"ops": []}, results)) == {"lost-write"}


def test_a_run_with_only_warnings_is_reproduced_by_its_warnings(tmp_path):
    """An unclean election's loss is a warning: reproducing that run means seeing the
    loss again, not merely another valid verdict."""
    results = {
        "checks": {
            "acked-lost": {"count": 3, "severity": "warning"},
            "duplicate": {"count": 9, "severity": "info"},
        }
    }
    run = recorded_run(tmp_path, {"ops": []}, results)
    assert _anomalies(run) == {"acked-lost"}
    assert _anomalies(run, every=True) == {"acked-lost", "duplicate"}


@pytest.mark.parametrize(
    "verdict, interrupted, code",
    [
        ("valid", False, 0),
        ("invalid", False, 1),
        ("unknown", False, 2),
        (None, False, 3),
        (None, True, 130),
    ],
)
def test_run_exit_codes_follow_the_verdict(tmp_path, verdict, interrupted, code):
    from kafka_chaos.run import RunOutcome

    run = store_mod.new_run_dir(tmp_path, "t")
    assert RunOutcome(run, verdict, None, interrupted=interrupted).exit_code == code
