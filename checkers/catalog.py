"""Every check by family: the one list the verdict, the report and the docs read.

Why this exists: ``checkers.api`` loops over the families that apply to a
run, the report takes each check's title and texts from its record, and
docs/results.md's tables are written from it (``python3 -m kafka_chaos.checkers.catalog
docs/results.md``; a test fails while they differ).  So a new check is one
record (``checkers.check.Check``) beside its filter, in a family here, or
``add`` ed from anywhere with frames of its own; a new family is one module
and a line in ``BUILTIN``, or a workload's own, in its declaration
(``workloads.registry.Declaration.families``).  Which families judge a workload's histories is
the workload's to say (``workloads.registry.check_families``).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from kafka_chaos.checkers.availability.statistics import AVAILABILITY_FAMILY
from kafka_chaos.checkers.check import Basis, Check, Family
from kafka_chaos.checkers.mirror.mirror_checks import MIRROR
from kafka_chaos.checkers.queue.queue_checks import QUEUE
from kafka_chaos.checkers.share.share_checks import SHARE
from kafka_chaos.checkers.spec_view import CheckedSpec
from kafka_chaos.checkers.txn.cycle_checks import CYCLES
from kafka_chaos.checkers.txn.txn_checks import TXN
from kafka_chaos.harness.generated_docs import write_or_check
from kafka_chaos.harness.named import Named
from kafka_chaos.workloads import registry as workloads

# results.json lists checks in this order: family by family, each family's own.
BUILTIN: tuple[Family, ...] = (QUEUE, TXN, CYCLES, SHARE, MIRROR, AVAILABILITY_FAMILY)

_families: dict[str, Family] = {f.name: f for f in BUILTIN}
_added: Named[Check] = Named("check")


def add(check: Check) -> Check:
    """Add a check to its family; every run that family judges has it from now on.

    The check brings its own anomaly frames (``Check.frames``).
    """
    if check.family not in _every_family():
        raise ValueError(f"check {check.name!r}: no family {check.family!r}")
    if find(check.name) is not None:  # a family's own, which ``_added`` does not hold
        raise ValueError(f"check {check.name!r} exists already")
    if check.frames is None:
        raise ValueError(f"check {check.name!r}: an added check needs frames of its own")
    return _added.add(check.name, check)


def remove(name: str) -> None:
    """Remove a check added with ``add`` (a test's, when the test is done)."""
    _added.remove(name)


def _every_family() -> dict[str, Family]:
    """The catalog's families, then those the workloads declare."""
    return {**_families, **{f.name: f for f in workloads.families()}}


def families() -> tuple[Family, ...]:
    return tuple(_every_family().values())


def checks_of(family: Family) -> tuple[Check, ...]:
    """A family's checks, its own and those added to it."""
    return family.checks + tuple(c for c in _added.values() if c.family == family.name)


def every_check() -> tuple[Check, ...]:
    return tuple(c for f in families() for c in checks_of(f))


def find(name: str) -> Check | None:
    return next((c for c in every_check() if c.name == name), None)


def names(family: str) -> tuple[str, ...]:
    """The names of one family's checks, under any settings."""
    return tuple(c.name for c in checks_of(_every_family()[family]))


def view(config: dict[str, Any] | CheckedSpec) -> CheckedSpec:
    return config if isinstance(config, CheckedSpec) else CheckedSpec.of(config)


def families_for(config: dict[str, Any] | CheckedSpec) -> tuple[Family, ...]:
    """The families that judge this run: those its workload brings that apply."""
    spec = view(config)
    brought = workloads.check_families(spec.workload)
    return tuple(f for f in families() if f.name in brought and f.applies(spec))


def checks_for(config: dict[str, Any] | CheckedSpec) -> tuple[Check, ...]:
    """Every check of this run, in results.json's order."""
    spec = view(config)
    return tuple(c for f in families_for(spec) for c in checks_of(f) if c.applies(spec))


# Settings that change some check's severity: a check that is an error under
# none of them never breaks a promise, so it needs no source (docs, report).
SETTINGS: tuple[dict[str, Any], ...] = (
    {},
    {"nemesis": {"faults": ["kill"]}},
    {"producer": {"acks": "0", "enable_idempotence": False}},
    {"producer": {"acks": "1", "enable_idempotence": False}},
    {"producer": {"acks": "all", "enable_idempotence": False}},
    {"producer": {"client": "java"}},
    {"topic": {"unclean_leader_election": True}},
    {"workload": "txn", "txn": {"mode": "ctp", "isolation_level": "read_uncommitted"}},
    {"workload": "txn", "checker": {"ww_deps": False}},
    {"workload": "mirror", "mirror": {"exactly_once": True}},
)


def can_be_error(check: Check) -> bool:
    """Whether some setting makes a finding of ``check`` count against the verdict."""
    return any(check.severity(view(config)) == "error" for config in SETTINGS)


def severities(config: dict[str, Any] | CheckedSpec) -> dict[str, str]:
    """Every check's severity under this run's settings: which findings break a
    promise the configured producer and consumer actually made."""
    spec = view(config)
    return {c.name: c.severity(spec) for c in every_check()}


# --- docs/results.md --------------------------------------------------------------

_TABLE = re.compile(r"(<!-- checks: (\S+) -->\n)(.*?)(<!-- /checks -->)", re.S)


def table(family: str) -> str:
    """docs/results.md's table of one family, in Markdown."""
    rows = ["| check | finds | severity |", "|---|---|---|"]
    for c in checks_of(_families[family]):
        rows.append(f"| `{c.name}` | {_cell(c.finds)} | {_cell(c.severity_doc)} |")
    return "\n".join(rows) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def basis_list(family: str) -> str:
    """docs/results.md's list of what each check of ``family`` rests on, in Markdown.

    A check that some setting makes an error quotes the promise it holds Kafka
    or a client to; one that is never an error quotes why its shape is legal.
    """
    lines = ["Basis:", ""]
    for c in checks_of(_families[family]):
        lines.append(f"* `{c.name}`: {_basis_text(c)}")
    return "\n".join(lines) + "\n"


def _basis_text(check: Check) -> str:
    b: Basis | None = check.basis
    if b is None:
        return "no basis recorded." if can_be_error(check) else "information only; no basis."
    label = "promise" if can_be_error(check) else "never an error, as its source says"
    text = f"{label}: \u201c{b.promise}\u201d ([{b.source}]({b.url}))."
    if b.allows:
        text += " Allowed: " + "; ".join(b.allows) + "."
    return text


def render_docs(text: str) -> str:
    """``text`` with every ``<!-- checks: FAMILY -->`` table and basis list written anew."""
    return _TABLE.sub(
        lambda m: m.group(1) + table(m.group(2)) + "\n" + basis_list(m.group(2)) + m.group(4),
        text,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="write the checks' tables into a Markdown file")
    p.add_argument("doc", type=Path, help="e.g. docs/results.md")
    p.add_argument("--check", action="store_true", help="only say whether it is up to date")
    args = p.parse_args(argv)
    fresh = render_docs(args.doc.read_text())
    return write_or_check(
        args.doc, fresh, args.check, f"python3 -m kafka_chaos.checkers.catalog {args.doc}"
    )


if __name__ == "__main__":
    sys.exit(main())
