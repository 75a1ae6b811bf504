"""What a fault is, as data, and the constants and error every nemesis shares.

A fault is a plain record (``FaultOp``) so that a schedule can be generated,
written to ``schedule.json``, read back and replayed without any code knowing
how the fault is carried out.  Carrying it out is the job of the fault
kinds (``nemeses/kinds.py``, looked up by name in ``nemeses/registry.py``),
all of which act on nodes only through ``node.run`` with a timeout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafka_chaos.harness.errors import ConfigError, HarnessError

TARGET_MODES = (
    "random",
    "leader",
    "controller",
    "coordinator",  # of the run's first transactional.id
    "group-coordinator",  # of the run's first consumer or share group
    "share-coordinator",  # of the run's first share group's state for one partition
    "minority",  # a group of nodes, drawn when the schedule is made (GROUP_TARGETS)
    "all",
    "isr",  # the in-sync replicas of the busiest partition, resolved when the fault starts
)
# Target modes that name a group of nodes, not one resolved node: drawn with
# the schedule's rng, like random targets, for kinds that take several
# targets at once (``FaultKind.groupable``).
GROUP_TARGETS = ("minority", "all")
# Target modes that name a group of nodes found only when the fault starts
# (like a leader, the ISR moves during a run); also for groupable kinds only.
RESOLVED_GROUP_TARGETS = ("isr",)


def group_size(group: str, nodes: int) -> int:
    """How many of ``nodes`` a target group takes: ``all`` of them, or a
    ``minority`` (fewer than half; at least one, so two nodes lose one)."""
    if group == "all":
        return nodes
    if group == "minority":
        return max(1, (nodes - 1) // 2)
    raise ConfigError(f"unknown target group {group!r} (known: {', '.join(GROUP_TARGETS)})")


# Fields a run adds to an op while executing it; they are not part of what
# to do, so replay and comparisons ignore them.
# ``applied_s``: when the fault was in effect (its apply returned);
# ``healing_s``: when its heal began.  Slow nodes (TCG guests) make both
# differ from ``started_s`` and the planned end, and these say which edge
# cost the time.
REALISED_FIELDS = ("started_s", "applied_s", "healing_s", "ended_s", "error", "resolved")

NEMESIS_COMMAND_TIMEOUT_S = 20.0
# Backstop for one node's share of a fault's apply or heal (``fan_out.on_nodes``):
# a few commands of NEMESIS_COMMAND_TIMEOUT_S, or a broker's clean stop with its
# grace, end well within it; a node still busy after it fails that step.
FAULT_STEP_TIMEOUT_S = 300.0

# Params leader/controller targeting adds to any targetable fault.
TARGETING_PARAMS = ("topic", "partition", "group", "transactional_id")


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
        # Its kind and params are checked against the registry of kinds
        # (``nemeses.registry.op_from_dict``): this module sits below them.
        return cls(**data)
