"""forensics/steps.py: which forensic steps a run takes, and when.

The run loops over ``at(moment, scene)``; these pin the order it had when the
steps were calls in kafka_chaos/run.py, and each step's own condition.
"""

from __future__ import annotations

from pathlib import Path

from kafka_chaos.forensics import disk_account
from kafka_chaos.forensics.steps import STEPS, Moment, Scene, at
from kafka_chaos.harness.spec import TestSpec


def _names(moment: Moment, scene: Scene) -> list[str]:
    return [s.name for s in at(moment, scene)]


def test_a_queue_run_verifies_replicas_then_reads_the_logs(tmp_path: Path) -> None:
    scene = Scene(tmp_path, TestSpec(), "t")
    assert _names(Moment.LIVE, scene) == ["verify replicas"]
    assert _names(Moment.LOGS, scene) == [
        "account for the disk faults",
        "cut the logs around share probes",
    ]
    assert _names(Moment.CHECKED, scene) == []  # no disk fault: nothing to trace


def test_a_tansu_run_reads_its_storage_instead_of_replica_logs(tmp_path: Path) -> None:
    tansu = TestSpec.from_dict({"cluster": {"broker": "tansu"}})
    assert _names(Moment.LIVE, Scene(tmp_path, tansu, "t")) == ["read the storage's evidence"]


def test_share_groups_and_coordinator_faults_keep_the_coordinators_state(tmp_path: Path) -> None:
    share = TestSpec.from_dict({"consumer": {"mode": "share"}})
    aimed = TestSpec.from_dict({"nemesis": {"targets": "group-coordinator"}})
    for spec in (share, aimed):
        live = _names(Moment.LIVE, Scene(tmp_path, spec, "t"))
        assert live == ["verify replicas", "keep the coordinators' state"]


def test_lost_values_are_traced_only_after_a_disk_fault_account(tmp_path: Path) -> None:
    (tmp_path / disk_account.RESULT).write_text("{}")
    assert _names(Moment.CHECKED, Scene(tmp_path, TestSpec(), "t")) == ["trace the lost values"]


def test_every_step_has_a_moment_and_a_name_of_its_own() -> None:
    names = [s.name for s in STEPS]
    assert len(names) == len(set(names))
    assert {s.moment for s in STEPS} == set(Moment)
