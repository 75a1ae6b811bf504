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

from typing import Any

from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.named import Named
from kafka_chaos.nemeses import (
    blackhole,
    clock,
    corrupt_segment,
    disk_full,
    mirror_maker,
    netem,
    netsplit,
    partition,
    power_loss,
    process,
    storage,
    unclean,
)
from kafka_chaos.nemeses.base import GROUP_TARGETS, RESOLVED_GROUP_TARGETS, TARGET_MODES, FaultOp
from kafka_chaos.nemeses.kinds import FaultKind, Sweep

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
    blackhole.Blackhole(),
    netsplit.Netsplit(),
    process.KillAll(),
    mirror_maker.MirrorKill(),
    mirror_maker.MirrorPause(),
    power_loss.PowerLoss(),
    disk_full.DiskFull(),
    corrupt_segment.CorruptSegment(),
    storage.StorageKill(),
    storage.StoragePause(),
    storage.StoragePartition(),
)

# Faults asked for that no honest mechanism here can do: refused in one line saying why.
REFUSED: dict[str, str] = {
    "slow-disk": "no mechanism here can delay a broker's writes or fsyncs: lazyfs (pinned "
    "a47a5ba) has no delay fault (its FIFO takes clear-cache, checkpoint, torn-op, torn-seq, "
    "crash and reports only), the kernel has no device-mapper (dm-delay) in this container, "
    "and a FUSE layer written here would slow every operation, not the ones chosen "
    "(see docs/disk-faults.md)",
}

_kinds: Named[FaultKind] = Named("fault")


def register(kind: FaultKind) -> FaultKind:
    """Add a kind; every generator, runner, sweep and model sees it from now on."""
    return _kinds.add(kind.name, kind)


def unregister(name: str) -> None:
    """Remove a kind added with ``register`` (a test's, when the test is done)."""
    _kinds.remove(name)


for _builtin in BUILTIN:
    register(_builtin)


def names() -> tuple[str, ...]:
    return _kinds.names()


def find(name: str) -> FaultKind | None:
    return _kinds.find(name)


def kind(name: str, where: str | None = None) -> FaultKind:
    """The kind called ``name``; a ConfigError (prefixed with ``where``) if there is none."""
    found = _kinds.find(name)
    if found is None:
        prefix = f"{where}: " if where else ""
        if name in REFUSED:
            raise ConfigError(f"{prefix}fault {name!r} is not available: {REFUSED[name]}")
        raise ConfigError(f"{prefix}unknown fault {name!r} (known: {', '.join(_kinds)})")
    return found


def sweeps() -> list[Sweep]:
    """Every kind's sweeps, each once, in the order they run on a node."""
    unique = dict.fromkeys(s for k in _kinds.values() for s in k.sweeps)
    return sorted(unique, key=lambda s: s.order)


def op_from_dict(data: Any, where: str = "schedule") -> FaultOp:
    """A recorded fault, checked: its kind exists and accepts its params, whose
    defaults are filled in (a recorded schedule says exactly what is done)."""
    op = FaultOp.from_dict(data, where)
    op.params = validate_op(op, where)
    return op


def validate_op(op: FaultOp, where: str) -> dict[str, Any]:
    """Reject ops a runner could not execute, naming the bad field.

    Returns the op's params with its kind's defaults filled in.
    """
    found = kind(op.f, where)
    if not isinstance(op.id, int) or isinstance(op.id, bool) or op.id < 0:
        raise ConfigError(f"{where}: fault id must be a non-negative integer, got {op.id!r}")
    for key in ("at_s", "duration_s"):
        value = getattr(op, key)
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{where}: {key} must be a number >= 0, got {value!r}")
    if op.target not in TARGET_MODES:
        raise ConfigError(
            f"{where}: target must be one of {', '.join(TARGET_MODES)}, got {op.target!r}"
        )
    if not isinstance(op.targets, list) or not all(isinstance(t, str) for t in op.targets):
        raise ConfigError(f"{where}: targets must be a list of node names")
    if not isinstance(op.params, dict):
        raise ConfigError(f"{where}: params must be a mapping")
    if not op.targets and op.target in ("random", *GROUP_TARGETS):
        raise ConfigError(f"{where}: fault {op.id} has no targets and no leader/controller target")
    if op.target in (*GROUP_TARGETS, *RESOLVED_GROUP_TARGETS) and not found.groupable:
        raise ConfigError(f"{where}: fault {op.f!r} cannot target a group of nodes ({op.target})")
    if op.target != "random" and not found.targetable:
        raise ConfigError(f"{where}: fault {op.f!r} cannot target the {op.target}")
    return found.params(op.params, where)
