"""What a check is, and what a family of checks gives the verdict.

Why: a check used to be a Spark filter whose name, severity rule and texts
lived in five other files.  A ``Check`` is now the one record of all that,
kept next to the filter that implements it, and a ``Family`` is a group of
checks that judge one kind of evidence together (the queue's positions, a
transaction's reads, Elle's cycles, share-group acknowledgements).  The
families are peers: ``checkers.api`` asks each whether it applies to the
run, collects every family's anomaly frames in one Spark job, then asks
each for what frames cannot say (searches, tallies, other inputs).
``checkers.catalog`` lists them; the report and docs/results.md read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kafka_chaos.checkers.collect import Found
from kafka_chaos.checkers.hints import Hint
from kafka_chaos.checkers.spec_view import CheckedSpec
from kafka_chaos.checkers.tables import Tables
from pyspark.sql import DataFrame, SparkSession

SeverityRule = Callable[[CheckedSpec], str]
# results.json's examples of the check -> what one anomaly is, in a few words.
MechanismRule = Callable[[list[dict[str, Any]]], str]


def always(severity: str) -> SeverityRule:
    """A severity that no setting changes."""
    return lambda _spec: severity


@dataclass(frozen=True)
class Basis:
    """Where the promise a check enforces is written, and what that source allows.

    Why: a finding is a claim against a promise, so every check of error
    severity names the sentence it holds Kafka or a client to (``promise``,
    quoted as written), the document that says it (``source``, with a link),
    and the shapes that document allows (``allows``), which the check must
    never call errors (as Jepsen's ``allowed-error-types`` does).  When the
    harness itself chose the rule (no source promises it), ``source`` says so.
    """

    promise: str
    source: str
    url: str
    allows: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    """One check: its name, what it proves, how severe a finding is, and its texts.

    Three texts for three readers: ``explanation`` goes into results.json
    (what a finding proves), ``finds`` and ``severity_doc`` into the table
    of docs/results.md (the precise rule), ``title``, ``meaning`` and
    ``causes`` into the report (for readers who are not Kafka experts), with
    ``mechanism`` naming a range of its anomalies and ``hints`` the settings
    of the run that explain them.
    """

    name: str
    family: str
    title: str
    explanation: str
    finds: str
    severity_doc: str
    meaning: str
    causes: str
    severity: SeverityRule = always("error")
    # The promise it enforces and its source; every check of error severity has one.
    basis: Basis | None = None
    # A shortfall (a value never read) proves loss only after a final drain
    # that read everything; without one the check is unknown, not invalid.
    needs_drain: bool = False
    # Only some runs of the family's workload have it (exactly-once: ctp).
    applies: Callable[[CheckedSpec], bool] = lambda _spec: True
    # Evidence worth computing for shown examples only, in place.
    enrich: Callable[[SparkSession, Tables, Found], None] | None = None
    # A check outside its family's own frames brings its anomalies here.
    frames: Callable[[Context], list[DataFrame]] | None = None
    # What one anomaly is, in a few words, for the report's ranges of them
    # ("offsets 1648-5077 of partition 0: <mechanism>"); "" shows the name.
    mechanism: str | MechanismRule = ""
    # Settings of the run that explain or excuse a finding (checkers/hints.py).
    hints: tuple[Hint, ...] = ()

    def mechanism_of(self, examples: list[dict[str, Any]]) -> str:
        """The mechanism of a range of this check's anomalies, given their examples."""
        m = self.mechanism
        return (m(examples) if callable(m) else m) or self.name

    def hints_for(self, config: dict[str, Any]) -> list[str]:
        """The sentences of this check's hints that this run's config.json calls for."""
        return [text for hint in self.hints for text in hint(config)]


@dataclass
class Context:
    """What the families read: the tables, the run's settings, and work they share."""

    spark: SparkSession
    t: Tables
    spec: CheckedSpec
    examples: int | None
    history: Path | None = None  # history.jsonl, for families that read its lines
    cycles: bool = True  # False: tests of other checks skip the cycle search
    meta: dict[int, dict[str, Any]] = field(default_factory=dict)  # per history
    _memo: dict[str, Any] = field(default_factory=dict)

    def memo(self, key: str, make: Callable[[], Any]) -> Any:
        """``make()`` once per analysis: a table two families or two steps need."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]


# Per history; the key None means every history.
PerHistory = dict[int | None, dict[str, Any]]


@dataclass
class Findings:
    """What a family adds beyond its frames, per history."""

    found: Found = field(default_factory=dict)  # counts and examples not from frames
    fields: PerHistory = field(default_factory=dict)  # check -> fields set on its result
    sections: PerHistory = field(default_factory=dict)  # results.json keys of the family
    stats: PerHistory = field(default_factory=dict)  # keys of results.json's stats


class Family(Protocol):
    """A group of checks that judge one kind of evidence together."""

    name: str
    checks: tuple[Check, ...]

    def applies(self, spec: CheckedSpec) -> bool:
        """Whether this run's evidence is this family's to judge."""
        ...

    def frames(self, ctx: Context) -> list[DataFrame]:
        """Anomaly frames (``tables.anomaly``), collected with every family's."""
        ...

    def findings(self, ctx: Context, found: Found) -> Findings:
        """What the frames cannot say; ``found``: every frame's anomalies."""
        ...


@dataclass(frozen=True)
class Group:
    """A family with nothing but frames: most are this plus a frames function."""

    name: str
    checks: tuple[Check, ...]
    make_frames: Callable[[Context], list[DataFrame]] = lambda _ctx: []
    applies_to: Callable[[CheckedSpec], bool] = lambda _spec: True

    def applies(self, spec: CheckedSpec) -> bool:
        return self.applies_to(spec)

    def frames(self, ctx: Context) -> list[DataFrame]:
        return self.make_frames(ctx)

    def findings(self, ctx: Context, found: Found) -> Findings:
        return Findings()
