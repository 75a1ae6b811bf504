"""Workloads by name: the one place that knows which workloads exist.

``kafka_chaos.run`` asks for ``spec.workload`` here and then talks to it only
through ``Workload``: start, stop, final drain, summary - Jepsen's split
between a test's client and its runner.  Adding a workload is adding a
module with a class that keeps this protocol, one line in ``_MODULES``
and one in ``_CHECK_FAMILIES`` (which checks judge its histories).  A
subclass of ``workloads.lifecycle.Lifecycle`` keeps the protocol for it:
the module supplies only its clients and its summary.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from harness.errors import ConfigError
from harness.history import HistoryWriter
from harness.spec import TestSpec
from workloads.sampler import Probe

# name -> "module:Class"; imported only when chosen, so a workload's client
# libraries load only for the runs that use it.
_MODULES = {
    "queue": "workloads.queue:QueueWorkload",
    "txn": "workloads.txn:TxnWorkload",
    "mirror": "workloads.mirror:MirrorWorkload",
}
# name -> the families of checks (checkers/catalog.py) its histories are
# judged by, so the checkers never ask which workload a run used.  A family
# may still decline a run by its settings (share: share-group consumers).
_CHECK_FAMILIES = {
    "queue": ("queue", "share", "availability"),
    "txn": ("queue", "txn", "cycles", "availability"),
    "mirror": ("queue", "mirror", "availability"),
}


class Workload(Protocol):
    """What a run needs from a workload."""

    def start(self) -> None:
        """Start every client; the run's clock starts now."""

    def stop(self, hurry: bool = False) -> Any:
        """Stop every client within a bound and return the summary.

        ``hurry``: the run was interrupted; flush in-flight work briefly.
        """

    def final_drain(self, timeout_s: float) -> Any:
        """After the heal: read back everything there is, for the checkers."""

    def summary(self) -> Any:
        """Counts so far, printable in one line."""


WorkloadFactory = Callable[..., Workload]


def names() -> list[str]:
    return sorted(_MODULES)


def check_families(name: str) -> tuple[str, ...]:
    """The families of checks that judge workload ``name``'s histories."""
    if name not in _CHECK_FAMILIES:
        raise ConfigError(f"workload: unknown workload {name!r} (known: {', '.join(names())})")
    return _CHECK_FAMILIES[name]


def create(
    spec: TestSpec,
    bootstrap: str,
    history: HistoryWriter,
    run_dir: Path,
    fault_status: Callable[[], str],
    probe: Probe,
) -> Workload:
    """The workload ``spec.workload`` names, wired to this run."""
    factory = _factory(spec.workload)
    return factory(spec, bootstrap, history, run_dir, fault_status=fault_status, probe=probe)


def _factory(name: str) -> WorkloadFactory:
    if name not in _MODULES:
        raise ConfigError(f"workload: unknown workload {name!r} (known: {', '.join(names())})")
    module, cls = _MODULES[name].split(":")
    return getattr(importlib.import_module(module), cls)


def validate(name: str, spec: TestSpec | None = None) -> None:
    """Refuse an unknown workload, or its bad settings, before any node is touched.

    A workload class may offer ``check_config(spec)`` raising ConfigError.
    """
    factory = _factory(name)
    check = getattr(factory, "check_config", None)
    if spec is not None and check is not None:
        check(spec)
