"""Workloads are chosen by name; the run never names a concrete one."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from kafka_chaos.harness import api_versions
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.workloads import registry
from kafka_chaos.workloads.mirror import MirrorWorkload
from kafka_chaos.workloads.queue import QueueWorkload
from kafka_chaos.workloads.txn import TxnWorkload

from kafka_chaos import run


@pytest.mark.parametrize(
    "name,cls", [("queue", QueueWorkload), ("txn", TxnWorkload), ("mirror", MirrorWorkload)]
)
def test_each_workload_keeps_the_protocol(name: str, cls: type) -> None:
    assert TestSpec().workload == "queue"
    assert registry.names() == ["mirror", "queue", "txn"]
    assert registry._factory(name) is cls
    for verb in ("start", "stop", "final_drain", "summary"):
        assert callable(getattr(cls, verb))
    assert "hurry" in inspect.signature(cls.stop).parameters


@pytest.mark.parametrize(
    "txn,message",
    [
        ({"max_ops": 0}, r"^txn.max_ops must be at least 1, got 0$"),
        ({"mode": "ctp", "isolation_level": "read_uncommitted"}, r"^txn.mode ctp needs"),
        ({"isolation_level": "serializable"}, r"^txn.isolation_level: 'serializable'"),
        ({"abort_probability": 1.5}, r"^txn.abort_probability must be in \[0, 1\]"),
    ],
)
def test_bad_transactional_settings_are_one_clear_error_before_any_run_dir(
    tmp_path: Path, txn: dict, message: str
) -> None:
    spec = TestSpec.from_dict({"workload": "txn", "txn": txn})
    with pytest.raises(ConfigError, match=message):
        run.run_test(spec, store=tmp_path)
    assert not any(tmp_path.iterdir())


def test_an_unknown_workload_is_one_clear_error_before_any_run_dir(tmp_path: Path) -> None:
    spec = TestSpec(workload="bank")
    message = r"^workload: unknown workload 'bank' \(known: mirror, queue, txn\)$"
    with pytest.raises(ConfigError, match=message):
        run.run_test(spec, store=tmp_path)
    assert not any(tmp_path.iterdir())


def test_the_orchestration_names_no_concrete_workload() -> None:
    source = Path(run.__file__).read_text()
    assert "QueueWorkload" not in source and "kafka_chaos.workloads.queue" not in source


def test_the_mirror_workload_needs_a_mirror_and_a_subscribing_group(tmp_path: Path) -> None:
    """Refused before any run directory or node exists, with the setting named."""
    for options, message in (
        ({"workload": "mirror"}, r"^workload mirror needs mirror\.enabled"),
        (
            {"workload": "mirror", "mirror": {"enabled": True}, "consumer": {"mode": "assign"}},
            r"consumer\.mode must be subscribe",
        ),
        (
            {"workload": "mirror", "mirror": {"enabled": True, "replication_policy": "prefix"}},
            r"^mirror\.replication_policy: 'prefix' is not one of identity, default$",
        ),
    ):
        with pytest.raises(ConfigError, match=message):
            run.run_test(TestSpec.from_dict(options), store=tmp_path)
    assert not any(tmp_path.iterdir())


def test_the_capabilities_a_run_asks_the_broker_for() -> None:
    """By its producer and consumer settings and its workload (harness/api_versions.NEEDS)."""

    def need(**layer: Any) -> list[str]:
        return registry.capabilities(TestSpec.from_dict(layer))

    base = ["produce and fetch", "idempotent producers"]
    assert need() == [*base, "consumer groups"]
    assert need(consumer={"group_protocol": "consumer"}) == [*base, "KIP-848 consumer groups"]
    assert need(consumer={"mode": "share"}) == [*base, "share groups"]
    assert need(consumer={"mode": "assign"}) == base
    assert need(producer={"enable_idempotence": False}) == ["produce and fetch", "consumer groups"]
    assert need(workload="txn") == [*base, "consumer groups", "transactions"]
    every = {n for layer in ({}, {"workload": "txn"}, {"consumer": {"mode": "share"}})
             for n in need(**layer)}  # fmt: skip
    assert every <= set(api_versions.NEEDS)
