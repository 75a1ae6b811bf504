"""A workload's own spec section loads, round-trips and stays out of others' configs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kafka_chaos.harness import spec_sections
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.spec import TestSpec


@dataclass
class _Beat:
    every_s: float = 1.0


@pytest.fixture
def beat() -> Iterator[spec_sections.Section]:
    section = spec_sections.add(spec_sections.Section("beat", _Beat))
    try:
        yield section
    finally:
        spec_sections.remove("beat")


def test_a_declared_section_round_trips(beat: spec_sections.Section) -> None:
    spec = TestSpec.from_dict({"workload": "queue", "beat": {"every_s": 2.5}})
    assert spec.section("beat") == _Beat(2.5)
    data = spec.to_dict()
    assert data["beat"] == {"every_s": 2.5} and "sections" not in data
    assert TestSpec.from_dict(data) == spec


def test_an_unset_section_is_its_defaults_and_is_not_written(beat: spec_sections.Section) -> None:
    spec = TestSpec()
    assert spec.section("beat") == _Beat()
    assert "beat" not in spec.to_dict()


def test_a_bad_key_in_a_declared_section_is_named(beat: spec_sections.Section) -> None:
    with pytest.raises(ConfigError, match=r"config\.beat\.every: unknown option"):
        TestSpec.from_dict({"beat": {"every": 1}})


def test_an_undeclared_section_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"config\.beat: unknown option"):
        TestSpec.from_dict({"beat": {}})
    with pytest.raises(ConfigError, match="no spec section 'beat'"):
        TestSpec().section("beat")
