"""The cluster tests' two units (tests/_xdist_order.py): sound enough to run side by side."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _xdist_order import CLUSTER_UNITS, SECOND_CLUSTER, scope_of

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
MODULES = sorted(p.name for p in INTEGRATION.glob("test_*.py"))


@pytest.fixture(autouse=True)
def two_units(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KC_TEST_CLUSTER_UNITS", "2")


def _unit(module: str) -> str:
    return scope_of(f"tests/integration/{module}::test_x")


def test_every_second_unit_module_exists() -> None:
    """A renamed module must not fall silently back into the first unit."""
    assert SECOND_CLUSTER <= set(MODULES)


def test_both_units_hold_tests_and_unit_modules_stay_alone() -> None:
    assert {_unit(m) for m in MODULES} == set(CLUSTER_UNITS)
    assert scope_of("tests/unit/test_a.py::test_b") == "tests/unit/test_a.py"
    assert scope_of("tests/vagrant/test_vm.py::test_b") == "cluster"


def test_modules_sharing_session_runs_or_fixed_names_share_a_unit() -> None:
    """A session fixture (the fault-free runs) made in both workers would run twice, and
    a fixed cluster name used in both would be claimed twice at once."""
    sources = {m: (INTEGRATION / m).read_text() for m in MODULES}
    users = {m for m, s in sources.items() if re.search(r"\bclean_runs?\b", s)}
    assert users and {_unit(m) for m in users} == {"cluster"}
    fixed = re.compile(r'(?:NAME = |name=)"([a-z0-9-]+)"')
    by_name: dict[str, set[str]] = {}
    for m, s in sources.items():
        for name in fixed.findall(s):
            by_name.setdefault(name, set()).add(_unit(m))
    assert by_name and all(len(units) == 1 for units in by_name.values()), by_name


def test_by_default_the_cluster_tests_are_two_units(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KC_TEST_CLUSTER_UNITS")
    assert {_unit(m) for m in MODULES} == set(CLUSTER_UNITS)


def test_one_unit_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KC_TEST_CLUSTER_UNITS", "1")
    assert {_unit(m) for m in MODULES} == {"cluster"}
