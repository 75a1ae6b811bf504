"""Workloads are chosen by name; the run never names a concrete one."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from harness import run
from harness.errors import ConfigError
from harness.spec import TestSpec
from workloads import registry
from workloads.queue import QueueWorkload


def test_the_queue_workload_is_the_default_and_keeps_the_protocol() -> None:
    assert TestSpec().workload == "queue"
    assert registry.names() == ["queue"]
    assert registry._factory("queue") is QueueWorkload
    for verb in ("start", "stop", "final_drain", "summary"):
        assert callable(getattr(QueueWorkload, verb))
    assert "hurry" in inspect.signature(QueueWorkload.stop).parameters


def test_an_unknown_workload_is_one_clear_error_before_any_run_dir(tmp_path: Path) -> None:
    spec = TestSpec(workload="bank")
    with pytest.raises(ConfigError, match=r"^workload: unknown workload 'bank' \(known: queue\)$"):
        run.run_test(spec, store=tmp_path)
    assert not any(tmp_path.iterdir())


def test_the_orchestration_names_no_concrete_workload() -> None:
    source = Path(run.__file__).read_text()
    assert "QueueWorkload" not in source and "workloads.queue" not in source
