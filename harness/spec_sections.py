"""Spec sections a workload declares, beside the ones every run has.

Why: ``harness/spec.py`` is the ground floor and cannot import the
workloads, yet a workload's settings (its section of config.json) must load
and round-trip like any other.  A workload's declaration
(``workloads/registry.py``) adds its section here; ``TestSpec`` keeps the
values under ``sections`` and writes each at the top level of config.json,
so a run whose workload declares none writes the same file as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka_chaos.harness.named import Named


@dataclass(frozen=True)
class Section:
    """A top-level key of config.json: its dataclass and how its values are refused.

    ``validate``: raises ``harness.errors.ConfigError`` naming the bad setting,
    called before any node is touched (``kafka_chaos.options.validate``).
    """

    name: str
    type: type
    validate: Callable[[Any], None] | None = None
    # Written to config.json with its defaults even when a run sets none: the
    # sections every config.json has held since before workloads declared them
    # (``txn``, ``mirror``), so old and new run directories read alike.
    always: bool = False
    # Keys of this section that list fault kinds: ``kafka_chaos.options``
    # checks each name against the nemeses' registry.
    fault_lists: tuple[str, ...] = ()


_added: Named[Section] = Named("spec section")


def add(section: Section) -> Section:
    return _added.add(section.name, section)


def remove(name: str) -> None:
    """Remove a section ``add`` ed (a test's workload, when the test is done)."""
    _added.remove(name)


def find(name: str) -> Section | None:
    return _added.find(name)


def every() -> tuple[Section, ...]:
    return _added.values()
