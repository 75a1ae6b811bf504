"""What a fault is, as data, and the few helpers every nemesis shares.

A fault is a plain record (``FaultOp``) so that a schedule can be generated,
written to ``schedule.json``, read back and replayed without any code knowing
how the fault is carried out.  Carrying it out is the job of the nemesis
modules (process, partition, netem, clock), all of which act on nodes only
through ``node.run`` with a timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness.errors import ConfigError, HarnessError
from harness.node import Node

# Faults acting on one node (or the resolved leader/controller).
SINGLE_NODE_KINDS = (
    "kill",
    "pause",
    "restart",
    "isolate-from-brokers",
    "netem",
    "unclean-election",
    "clock-bump",
    "clock-strobe",
)
# Faults that move a node's wall clock (nemeses/clock.py).
CLOCK_KINDS = ("clock-bump", "clock-strobe")
# Faults acting on every node in turn.
ROLLING_KINDS = ("rolling-restart", "hard-rolling-restart")
FAULT_KINDS = (*SINGLE_NODE_KINDS, "partition", *ROLLING_KINDS)
# Faults whose target may be the partition leader or the active controller.
TARGETABLE_KINDS = (
    "kill",
    "pause",
    "restart",
    "isolate-from-brokers",
    "partition",
    "unclean-election",
    "clock-bump",
    "clock-strobe",
)
TARGET_MODES = ("random", "leader", "controller", "coordinator")
TOPOLOGIES = ("isolate", "halves", "bridge", "majorities-ring", "grudge")

# Fields a run adds to an op while executing it; they are not part of what
# to do, so replay and comparisons ignore them.
# ``applied_s``: when the fault was in effect (its apply returned);
# ``healing_s``: when its heal began.  Slow nodes (TCG guests) make both
# differ from ``started_s`` and the planned end, and these say which edge
# cost the time.
REALISED_FIELDS = ("started_s", "applied_s", "healing_s", "ended_s", "error", "resolved")

NEMESIS_COMMAND_TIMEOUT_S = 20.0

# Clock fault parameters and their defaults.  A strobe flips no faster than
# once a second because local nodes' JVMs (libfaketime) re-read their offset
# only that often (by default every other second, so each JVM sees every
# state); the same bound everywhere keeps a schedule replayable on every
# backend.
CLOCK_DEFAULTS: dict[str, dict[str, int]] = {
    "clock-bump": {"delta_ms": 60_000},
    "clock-strobe": {"delta_ms": 10_000, "period_ms": 2_000},
}
MAX_CLOCK_DELTA_MS = 86_400_000  # a day
MIN_STROBE_PERIOD_MS = 1_000
MAX_STROBE_PERIOD_MS = 60_000
# Params leader/controller targeting adds to any targetable fault.
TARGETING_PARAMS = ("topic", "partition")


class NemesisError(HarnessError):
    """A fault could not be applied or healed; the message names node and step."""


@dataclass
class FaultOp:
    """One fault of a schedule.

    ``targets`` empty means "resolve when the fault starts" (leader or
    controller targeting); the runner then fills it in, so a realised
    schedule always names the nodes that were actually hit and a replay hits
    the same ones.
    """

    id: int
    f: str
    at_s: float
    duration_s: float
    targets: list[str] = field(default_factory=list)
    target: str = "random"
    params: dict[str, Any] = field(default_factory=dict)
    started_s: float | None = None
    applied_s: float | None = None
    healing_s: float | None = None
    ended_s: float | None = None
    error: str | None = None
    resolved: dict[str, Any] | None = None

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "f": self.f,
            "at_s": self.at_s,
            "duration_s": self.duration_s,
            "targets": list(self.targets),
            "target": self.target,
            "params": self.params,
        }
        for name in REALISED_FIELDS:
            value = getattr(self, name)
            if value is not None:
                data[name] = round(value, 3) if isinstance(value, float) else value
        return data

    def plan(self) -> dict[str, Any]:
        """The op without what a run added: what replay must reproduce."""
        data = self.to_dict()
        for name in REALISED_FIELDS:
            data.pop(name, None)
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str = "schedule") -> FaultOp:
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: a fault must be a mapping, got {type(data).__name__}")
        unknown = set(data) - {f for f in cls.__dataclass_fields__}
        if unknown:
            raise ConfigError(f"{where}: unknown fault field(s) {sorted(unknown)}")
        for key in ("id", "f", "at_s", "duration_s"):
            if key not in data:
                raise ConfigError(f"{where}: fault is missing {key!r}")
        op = cls(**data)
        validate_op(op, where)
        if op.f in CLOCK_KINDS:  # a recorded schedule says exactly what is done
            op.params = clock_params(op.f, op.params, where)
        return op


def validate_op(op: FaultOp, where: str) -> None:
    """Reject ops a runner could not execute, naming the bad field."""
    if op.f not in FAULT_KINDS:
        raise ConfigError(f"{where}: unknown fault {op.f!r} (known: {', '.join(FAULT_KINDS)})")
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
    if not op.targets and op.target == "random":
        raise ConfigError(f"{where}: fault {op.id} has no targets and no leader/controller target")
    if op.target != "random" and op.f not in TARGETABLE_KINDS:
        raise ConfigError(f"{where}: fault {op.f!r} cannot target the {op.target}")
    if op.f in CLOCK_KINDS:
        clock_params(op.f, op.params, where)


def clock_params(f: str, params: dict[str, Any], where: str = "fault") -> dict[str, Any]:
    """``params`` with the clock fault's defaults filled in; a bad value is a ConfigError.

    Unknown keys are refused (a typo like ``delta`` must not silently run the
    default), except the ones leader/controller targeting adds.
    """
    defaults = CLOCK_DEFAULTS[f]
    unknown = sorted(set(params) - set(defaults) - set(TARGETING_PARAMS))
    if unknown:
        raise ConfigError(f"{where}: {f} has no param(s) {unknown} (known: {', '.join(defaults)})")
    out = {**defaults, **params}
    delta = out["delta_ms"]
    if not _is_int(delta) or delta == 0 or abs(delta) > MAX_CLOCK_DELTA_MS:
        raise ConfigError(
            f"{where}: {f} delta_ms must be a non-zero integer within "
            f"±{MAX_CLOCK_DELTA_MS}, got {delta!r}"
        )
    if "period_ms" in defaults:
        period = out["period_ms"]
        if not _is_int(period) or not MIN_STROBE_PERIOD_MS <= period <= MAX_STROBE_PERIOD_MS:
            raise ConfigError(
                f"{where}: {f} period_ms must be an integer from {MIN_STROBE_PERIOD_MS} to "
                f"{MAX_STROBE_PERIOD_MS}, got {period!r}"
            )
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


T = TypeVar("T")


def on_nodes(nodes: Iterable[Node], fn: Callable[[Node], T]) -> dict[str, T]:
    """Run ``fn`` on several nodes at once; a partition must hit all sides together.

    Every node is attempted even if another fails; the first failure is
    re-raised afterwards so that no side is silently skipped.
    """
    nodes = list(nodes)
    if not nodes:
        return {}
    results: dict[str, T] = {}
    errors: list[BaseException] = []
    with ThreadPoolExecutor(max_workers=min(8, len(nodes))) as pool:
        futures = {n.name: pool.submit(fn, n) for n in nodes}
        for name, fut in futures.items():
            try:
                results[name] = fut.result()
            except BaseException as e:  # noqa: BLE001 - collected and re-raised below
                errors.append(e)
    if errors:
        raise errors[0]
    return results
