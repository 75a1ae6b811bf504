"""The mirror workload's section of the spec and config.json (``mirror``), its faults
and how its values are refused.

Why here and not in ``harness/spec.py`` and ``kafka_chaos/options.py``: only the
mirror workload, its MirrorMaker and what judges its histories read these
settings, so the workload declares them (``workloads/registry.py``), as any
workload would.  Every config.json holds the section (``always``), as it did
when the ground floor kept it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.option import Option, parse_bool, parse_faults
from kafka_chaos.harness.spec_sections import Section

NAME = "mirror"
REPORT_TITLE = "Disaster recovery: dc1, dc2 and the failover"
# The fault kinds that hit the MirrorMaker node (nemeses/mirror_maker.py), what
# ``mirror.faults`` may hold; faults inside dc2 are broker faults.
FAULTS = ("mirror-kill", "mirror-pause")


@dataclass
class MirrorSpec:
    """Disaster recovery: a second cluster, MirrorMaker 2 between them, a failover.

    Off unless ``enabled``.  The run's cluster is ``dc1``; ``dc2`` is a cluster
    of ``dc2_nodes`` named ``<cluster>-dc2`` and MirrorMaker 2 runs on a node
    of its own, ``<cluster>-mm`` (docs/mirror.md).  ``failover_at_s``: when the
    producers and the group move to dc2 (None: they never do).
    """

    enabled: bool = False
    dc2_nodes: int = 1
    exactly_once: bool = False  # KIP-656: dc2.exactly.once.source.support=enabled
    # identity: dc2's copy keeps the name (what a failover writes to);
    # default: dc2's copy is ``dc1.<topic>`` and the failed-over group reads both.
    replication_policy: str = "identity"
    sync_interval_s: float = 5.0  # checkpoints, group offset and topic refresh intervals
    offset_lag_max: int = 100  # MirrorMaker's default: an offset sync at most every 100 records
    tasks: int = 2
    heap_mb: int = 384
    failover_at_s: float | None = None
    # After the heal: how long MirrorMaker may take to copy what dc1 holds.
    catch_up_timeout_s: float = 90.0
    # MirrorMaker faults (mirror-kill, mirror-pause), scheduled like dc1's own;
    # they share the nemesis's interval and duration.
    faults: list[str] = field(default_factory=list)
    # Faults inside dc2 (kill, pause, ...: any broker fault), on dc2's own
    # schedule, again with the nemesis's interval and duration.
    dc2_faults: list[str] = field(default_factory=list)


def of(spec: Any) -> MirrorSpec:
    """The run's mirror settings (``spec``: a ``harness.spec.TestSpec``)."""
    return spec.section(NAME)


def validate(m: MirrorSpec) -> None:
    """MirrorMaker faults act on its node, dc2's on dc2's brokers: each list holds
    only the kinds that can hit what it names."""
    wrong = [f for f in m.faults if f not in FAULTS]
    if wrong:
        raise ConfigError(
            f"mirror.faults: {', '.join(wrong)} cannot hit the MirrorMaker node (known: "
            f"{', '.join(FAULTS)}; faults inside dc1 go in nemesis.faults, inside "
            "dc2 in mirror.dc2_faults)"
        )
    for f in m.dc2_faults:
        if f in FAULTS:
            raise ConfigError(f"mirror.dc2_faults: {f} hits the MirrorMaker node (mirror.faults)")
    if (m.faults or m.dc2_faults or m.failover_at_s is not None) and not m.enabled:
        raise ConfigError(
            "mirror.faults, mirror.dc2_faults and mirror.failover_at_s need mirror.enabled"
        )


SECTION = Section(NAME, MirrorSpec, validate, always=True, fault_lists=("dc2_faults",))

# The mirror workload's run options (kafka_chaos/options.py adds a declaration's own).
OPTIONS: tuple[Option, ...] = (
    Option("--mirror", "mirror.enabled", parse_bool, "disaster recovery: dc2 and MirrorMaker 2"),
    Option("--dc2-nodes", "mirror.dc2_nodes", int, "mirror: brokers of dc2"),
    Option("--failover-at", "mirror.failover_at_s", float, "mirror: seconds until the failover"),
    Option("--mirror-eos", "mirror.exactly_once", parse_bool, "mirror: exactly-once MirrorMaker"),
    Option(
        "--replication-policy",
        "mirror.replication_policy",
        str,
        "mirror: dc2's topic names",
        ("identity", "default"),
    ),
    Option("--mirror-faults", "mirror.faults", parse_faults, "mirror: MirrorMaker faults, or none"),
    Option("--dc2-faults", "mirror.dc2_faults", parse_faults, "mirror: faults inside dc2, or none"),
)
