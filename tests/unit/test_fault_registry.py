"""The fault registry holds exactly today's kinds, each declaring what the old
kind tuples of ``nemeses/base.py`` said about it."""

from __future__ import annotations

import pytest
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.nemeses import registry

TODAY = (
    "kill",
    "pause",
    "restart",
    "isolate-from-brokers",
    "netem",
    "unclean-election",
    "clock-bump",
    "clock-strobe",
    "partition",
    "rolling-restart",
    "hard-rolling-restart",
    "blackhole",
    "netsplit",
    "kill-all",
    "mirror-kill",
    "mirror-pause",
    "power-loss",
    "disk-full",
    "corrupt-segment",
    "storage-kill",
    "storage-pause",
    "storage-partition",
)


def test_the_registry_lists_exactly_todays_kinds_in_order():
    assert registry.names() == TODAY
    assert all(registry.kind(name).name == name for name in TODAY)


def _having(predicate) -> list[str]:
    return [name for name in TODAY if predicate(registry.kind(name))]


def test_each_kind_declares_its_shape_and_targeting():
    assert _having(lambda k: k.shape == "node") == [
        *TODAY[:8], "blackhole", "mirror-kill", "mirror-pause", "power-loss", "disk-full",
        "corrupt-segment", "storage-partition",
    ]  # fmt: skip
    assert _having(lambda k: k.shape == "every-node") == [
        "rolling-restart", "hard-rolling-restart", "netsplit", "kill-all", "storage-kill",
        "storage-pause",
    ]  # fmt: skip
    assert _having(lambda k: k.shape == "topology") == ["partition"]
    assert _having(lambda k: k.targetable) == [
        "kill",
        "pause",
        "restart",
        "isolate-from-brokers",
        "unclean-election",
        "clock-bump",
        "clock-strobe",
        "partition",
        "blackhole",
        "power-loss",
        "disk-full",
        "corrupt-segment",
    ]
    assert _having(lambda k: k.groupable) == ["kill", "restart", "power-loss"]


def test_the_sweep_after_a_crash_undoes_each_thing_once_network_first():
    assert [s.what for s in registry.sweeps()] == [
        "partition rules",
        "packet faults",
        "clock",
        "storage node",
        "paused processes",
        "paused MirrorMaker",
        "disk ballast",
        "stopped processes",
        "stopped MirrorMaker",
    ]
    assert all(registry.kind(name).sweeps for name in TODAY), "every kind says what it leaves"


def test_unknown_and_duplicate_kinds_are_refused():
    with pytest.raises(ConfigError, match=r"^where: unknown fault 'nuke' \(known: kill, pause, "):
        registry.kind("nuke", "where")
    assert registry.find("nuke") is None
    with pytest.raises(ValueError, match="fault 'kill' exists already"):
        registry.register(registry.kind("kill"))
