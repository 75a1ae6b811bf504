"""Fault and target names held outside nemeses/ are ones the fault registry knows.

A fault kind is declared once (nemeses/registry.py).  A few declarations
below or beside it must still name faults, since a peer or a lower floor
cannot import the registry: a broker's refusals (harness/broker_*.py), the
mirror workload's own faults (workloads/mirror_spec.py), the share checks'
broker-memory faults.  A fault renamed in nemeses/ and not there would leave
a refusal that never fires, or a fault the mirror section rejects; this test
fails first, naming the stale name and where it is held.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafka_chaos.checkers.share import share_tenures
from kafka_chaos.forensics import coordinator_state
from kafka_chaos.harness import broker
from kafka_chaos.nemeses import registry
from kafka_chaos.nemeses.base import TARGET_MODES
from kafka_chaos.workloads import mirror_spec


def _unknown(held: dict[str, Iterable[str]], known: Iterable[str]) -> list[str]:
    """``where: name`` for every held name ``known`` lacks."""
    known = set(known)
    return [f"{where}: {name}" for where, names in held.items() for name in names
            if name not in known]  # fmt: skip


def _faults_held() -> dict[str, Iterable[str]]:
    held: dict[str, Iterable[str]] = {
        "workloads/mirror_spec.py FAULTS": mirror_spec.FAULTS,
        "checkers/share/share_tenures.py WIPING": share_tenures.WIPING,
        "checkers/share/share_tenures.py NOT_BROKER": share_tenures.NOT_BROKER,
    }
    for name in broker.IMPLEMENTATIONS:
        held[f"broker {name} refused_faults"] = broker.named(name).refused_faults
    return held


def _targets_held() -> dict[str, Iterable[str]]:
    held: dict[str, Iterable[str]] = {
        "forensics/coordinator_state.py COORDINATOR_TARGETS": coordinator_state.COORDINATOR_TARGETS,
    }
    for name in broker.IMPLEMENTATIONS:
        held[f"broker {name} refused_targets"] = broker.named(name).refused_targets
    return held


def test_every_fault_named_outside_the_registry_is_registered() -> None:
    held = _faults_held()
    assert sum(len(list(names)) for names in held.values()) > 15  # the names were read
    assert _unknown(held, registry.names()) == []


def test_every_target_named_outside_the_nemeses_is_a_target_mode() -> None:
    held = _targets_held()
    assert "leader" in held["broker tansu refused_targets"]
    assert _unknown(held, TARGET_MODES) == []


def test_a_stale_name_is_reported_with_where_it_is_held() -> None:
    held = {"somewhere": ("kill", "mirror-kil")}
    assert _unknown(held, registry.names()) == ["somewhere: mirror-kil"]
