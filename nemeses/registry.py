"""Every fault kind by name: the one place the nemeses look a fault up.

Why this exists: validation, the schedule generator, the runner's apply and
heal, the sweep after a crash (``runner.heal_cluster``) and the property
tests' model all need to know every kind.  Each used to keep its own list
or if/elif of fault names; now they iterate or look up this registry, so
a kind is added in one place (``BUILTIN``, or ``register`` for kinds that
live elsewhere, such as a test's) and nothing else changes.

The order is the one error messages list kinds in (``known: ...``), and
the order the sweeps of equal rank run in.
"""

from __future__ import annotations

from harness.errors import ConfigError
from nemeses import clock, netem, partition, process, unclean
from nemeses.kinds import FaultKind, Sweep

BUILTIN: tuple[FaultKind, ...] = (
    process.Kill(),
    process.Pause(),
    process.Restart(),
    partition.IsolateFromBrokers(),
    netem.Netem(),
    unclean.UncleanElection(),
    clock.ClockBump(),
    clock.ClockStrobe(),
    partition.Partition(),
    process.RollingRestart(),
    process.HardRollingRestart(),
)

_kinds: dict[str, FaultKind] = {}


def register(kind: FaultKind) -> FaultKind:
    """Add a kind; every generator, runner, sweep and model sees it from now on."""
    if kind.name in _kinds:
        raise ValueError(f"fault {kind.name!r} is registered already")
    _kinds[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind added with ``register`` (a test's, when the test is done)."""
    del _kinds[name]


for _builtin in BUILTIN:
    register(_builtin)


def names() -> tuple[str, ...]:
    return tuple(_kinds)


def find(name: str) -> FaultKind | None:
    return _kinds.get(name)


def kind(name: str, where: str | None = None) -> FaultKind:
    """The kind called ``name``; a ConfigError (prefixed with ``where``) if there is none."""
    found = _kinds.get(name)
    if found is None:
        prefix = f"{where}: " if where else ""
        raise ConfigError(f"{prefix}unknown fault {name!r} (known: {', '.join(_kinds)})")
    return found


def sweeps() -> list[Sweep]:
    """Every kind's sweeps, each once, in the order they run on a node."""
    unique = dict.fromkeys(s for k in _kinds.values() for s in k.sweeps)
    return sorted(unique, key=lambda s: s.order)
