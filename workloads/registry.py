"""Workloads by name: the one place that knows which workloads exist.

``kafka_chaos.run`` asks for ``spec.workload`` here and then talks to it only
through ``Workload``: start, stop, final drain, summary - Jepsen's split
between a test's client and its runner.  Whatever else the packages around a
workload need to know of it (which checks judge it, which clients run it,
which groups a coordinator fault means, what the run records for it) is its
``Declaration`` here, so that no package asks which workload a run used by
name.  Adding a workload is adding a module with a class that keeps this
protocol and one ``Declaration`` in ``_BUILTIN``.  A subclass of
``workloads.lifecycle.Lifecycle`` keeps the protocol for it: the module
supplies only its clients and its summary.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kafka_chaos.harness import spec_sections
from kafka_chaos.harness.errors import ConfigError
from kafka_chaos.harness.history import HistoryWriter
from kafka_chaos.harness.kafka_names import group_name, share_group_name
from kafka_chaos.harness.named import Named
from kafka_chaos.harness.option import Option
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.harness.spec_sections import Section
from kafka_chaos.workloads import mirror_spec, queue_lines, txn_lines, txn_spec
from kafka_chaos.workloads.declared_parts import LineKind, ReportSection, Shown
from kafka_chaos.workloads.sampler import Probe


def _queue_group(spec: TestSpec, k: int) -> str:
    """The queue workload's k-th share group or consumer group, by its consumer mode."""
    return share_group_name(spec, k) if spec.consumer.mode == "share" else group_name(spec, k)


def _txn_consumers(config: dict[str, Any]) -> str:
    txn = config.get(txn_spec.NAME)
    return f"transactional, {(txn if isinstance(txn, dict) else {}).get('isolation_level', '?')}"


@dataclass(frozen=True)
class Declaration:
    """What the packages around a workload ask about it, declared once.

    ``factory``: "module:Class", imported only when chosen, so a workload's
    client libraries load only for the runs that use it.
    ``check_families``: the families of checks (checkers/catalog.py) its
    histories are judged by, so the checkers never ask which workload a run
    used.  A family may still decline a run by its settings (share:
    share-group consumers).
    ``java_client``: whether its clients can be Kafka's Java client.
    ``one_client``: whether its producer and consumer must be the same client
    (one process both produces and consumes).
    ``group``: the name of its k-th group, when its groups are the run's
    subject: a group- or share-coordinator fault then targets the first, and
    the coordinators' state of them all is kept after the heal.
    ``records_features``: whether config.json records the cluster's finalized
    features (a transactional run's protocol depends on ``transaction.version``).
    ``shown``: how its history's lines are recognised when read without a
    config, and the settings they imply (checkers/history_workload.py asks
    every declaration's, ``workloads.declared_parts.Shown``).
    ``consumers``: the report's few words on how a run consumed (a cell of the
    version/protocol matrix, reports/render.py) from its config.json, when
    its own clients say it rather than the consumer settings.
    ``section``: its own section of the spec and config.json, and how its
    values are refused (harness/spec_sections.py).
    ``line_kinds``: the history lines of its own it writes, and their rows,
    the row columns and kinds of row they add (checkers/ingest/line_rows.py
    builds its schema from them).
    ``families``: check families of its own (``checkers.check.Family``),
    judged beside the catalog's when ``check_families`` names them.
    ``options``: run options of its own (kafka_chaos/options.py adds them).
    ``report_sections``: sections of its own in the run's report.
    ``needs``: what the broker must support for it beyond what its producer and
    consumer settings need (``harness.api_versions.NEEDS`` names, asked before
    a run: ``capabilities``).
    """

    factory: str
    check_families: tuple[str, ...]
    java_client: bool = False
    one_client: bool = False
    group: Callable[[TestSpec, int], str] | None = None
    records_features: bool = False
    shown: tuple[Shown, ...] = ()
    consumers: Callable[[dict[str, Any]], str] | None = None
    section: Section | None = None
    line_kinds: tuple[LineKind, ...] = ()
    families: tuple[Any, ...] = ()
    options: tuple[Option, ...] = ()
    report_sections: tuple[ReportSection, ...] = ()
    needs: tuple[str, ...] = ()


# The product's workloads, declared at the end of this module (``register``).
_BUILTIN: dict[str, Declaration] = {
    "queue": Declaration(
        "kafka_chaos.workloads.queue:QueueWorkload",
        ("queue", "share", "availability"),
        java_client=True,
        group=_queue_group,
        shown=queue_lines.SHOWN,
    ),
    "txn": Declaration(
        "kafka_chaos.workloads.txn:TxnWorkload",
        ("queue", "txn", "cycles", "availability"),
        java_client=True,
        one_client=True,
        records_features=True,
        needs=("transactions",),
        shown=txn_lines.SHOWN,
        consumers=_txn_consumers,
        section=txn_spec.SECTION,
        line_kinds=(txn_lines.TXN_LINE,),
        options=txn_spec.OPTIONS,
    ),
    "mirror": Declaration(
        "kafka_chaos.workloads.mirror:MirrorWorkload",
        ("queue", "mirror", "availability"),
        section=mirror_spec.SECTION,
        options=mirror_spec.OPTIONS,
        shown=queue_lines.SHOWN,
        report_sections=(
            ReportSection(
                "mirror", mirror_spec.REPORT_TITLE, "kafka_chaos.reports.mirror:mirror_section"
            ),
        ),
    ),
}

_DECLARED: Named[Declaration] = Named("workload")
# Every declared line kind by its ``f``: ingest asks for each line it parses.
_LINE_KINDS: dict[str, LineKind] = {}


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


def register(name: str, declaration: Declaration) -> Declaration:
    """Declare workload ``name`` (the product's below, or a test's example from
    outside this module): every package that asks the declarations knows it
    from now on, and its spec section loads."""
    _DECLARED.add(name, declaration)
    clash = [k.f for k in declaration.line_kinds if k.f in _LINE_KINDS]
    if clash:
        _DECLARED.remove(name)
        raise ValueError(f"workload {name!r}: line kind {clash[0]!r} is declared already")
    if declaration.section is not None:
        spec_sections.add(declaration.section)
    _LINE_KINDS.update((k.f, k) for k in declaration.line_kinds)
    return declaration


def unregister(name: str) -> None:
    """Remove a workload ``register`` ed (a test's, when the test is done)."""
    declaration = _DECLARED.remove(name)
    for kind in declaration.line_kinds:
        del _LINE_KINDS[kind.f]
    if declaration.section is not None:
        spec_sections.remove(declaration.section.name)


def names() -> list[str]:
    return sorted(_DECLARED.names())


def line_kind(f: str) -> LineKind | None:
    """The declared line kind ``f``, or None for the history contract's own lines."""
    return _LINE_KINDS.get(f)


def line_kinds() -> tuple[LineKind, ...]:
    """Every declared line kind, in the order they were declared."""
    return tuple(_LINE_KINDS.values())


def shown() -> tuple[tuple[str, Shown], ...]:
    """How each workload's lines are recognised: (workload, ``Shown``), in
    the order they were declared."""
    return tuple((name, s) for name in _DECLARED for s in declared(name).shown)


def families() -> tuple[Any, ...]:
    """The check families workloads bring beyond the catalog's own."""
    return tuple(f for d in _DECLARED.values() for f in d.families)


def options() -> tuple[Option, ...]:
    """The run options workloads bring beyond kafka_chaos/options.py's table."""
    return tuple(o for d in _DECLARED.values() for o in d.options)


def capabilities(spec: TestSpec) -> list[str]:
    """What the broker must support for this run (``harness.api_versions.NEEDS``
    names): what every run needs, what its producer and consumer settings need,
    and its workload's own."""
    need = ["produce and fetch"]
    if spec.producer.enable_idempotence:
        need.append("idempotent producers")
    mode, protocol = spec.consumer.mode, spec.consumer.group_protocol
    if mode == "share":
        need.append("share groups")
    elif mode == "subscribe":
        need.append("KIP-848 consumer groups" if protocol == "consumer" else "consumer groups")
    need += [n for n in declared(spec.workload).needs if n not in need]
    return need


def validate_section(spec: TestSpec) -> None:
    """Refuse bad values in the sections the run holds (ConfigError): its
    workload's own, and those every run holds (``always``: a mirror run's
    settings given to a queue run are refused as before)."""
    own = declared(spec.workload).section
    for section in spec_sections.every():
        held = section.name in spec.sections or section is own
        if held and section.validate is not None:
            section.validate(spec.section(section.name))


def declared(name: str) -> Declaration:
    """Workload ``name``'s declaration; an unknown name is one clear error."""
    found = _DECLARED.find(name)
    if found is None:
        raise ConfigError(f"workload: unknown workload {name!r} (known: {', '.join(names())})")
    return found


def find(name: Any) -> Declaration | None:
    """Workload ``name``'s declaration, or None: for readers of old run
    directories, whose config may name a workload that is gone."""
    return _DECLARED.find(name) if isinstance(name, str) else None


def first_group(spec: TestSpec) -> str | None:
    """The run's first group, what a coordinator fault targets by default; None
    when the workload's groups are not the run's subject."""
    group = declared(spec.workload).group
    return None if group is None else group(spec, 0)


def check_families(name: str) -> tuple[str, ...]:
    """The families of checks that judge workload ``name``'s histories."""
    return declared(name).check_families


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
    module, cls = declared(name).factory.split(":")
    return getattr(importlib.import_module(module), cls)


def validate(name: str, spec: TestSpec | None = None) -> None:
    """Refuse an unknown workload, or its bad settings, before any node is touched.

    A workload class may offer ``check_config(spec)`` raising ConfigError.
    """
    factory = _factory(name)
    check = getattr(factory, "check_config", None)
    if spec is not None and check is not None:
        check(spec)


for _name, _declaration in _BUILTIN.items():
    register(_name, _declaration)
