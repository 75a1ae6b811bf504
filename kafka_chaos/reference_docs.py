"""The docs' tables of flags, scenarios and faults, written from the code that declares them.

Why: the README kept these three tables by hand beside the options table,
``scenarios.SCENARIOS`` and ``nemeses.registry``, and each drifted from its
code.  Now a table sits between markers in a Markdown file::

    <!-- generated: flags -->
    ...
    <!-- /generated -->

and ``python3 -m kafka_chaos.reference_docs docs/reference.md docs/scenarios.md
docs/faults.md`` writes every marked table anew (``--check``: only says which
file is stale; a unit test runs it), as ``checkers.catalog`` writes the
check tables of docs/results.md.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_chaos.harness.generated_docs import write_or_check
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.nemeses import registry
from kafka_chaos.nemeses.kinds import FaultKind
from kafka_chaos.options import Option, every_option, merge
from kafka_chaos.scenarios import SCENARIOS, scenario_layer

_BLOCK = re.compile(r"(<!-- generated: (\S+) -->\n)(.*?)(<!-- /generated -->)", re.S)
DOCS = ("docs/reference.md", "docs/scenarios.md", "docs/faults.md")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(value: Any) -> str:
    """A default as the docs show it."""
    if value is None or value == [] or value == {}:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _at(data: dict[str, Any], dotted: str) -> Any:
    for key in dotted.split("."):
        data = data[key]
    return data


def _default(opt: Option, one: dict[str, Any], two: dict[str, Any]) -> str:
    """The spec's default; one that differs between two fresh specs is drawn per run."""
    first, second = _at(one, opt.path), _at(two, opt.path)
    return "random, recorded" if first != second else _value(first)


# --- the tables ---------------------------------------------------------------------


def flags() -> str:
    """Every run flag: what it sets in config.json, its choices and its default."""
    one, two = TestSpec().to_dict(), TestSpec().to_dict()
    rows = ["| flag | sets | what it does | choices | default |", "|---|---|---|---|---|"]
    for opt in every_option():
        sets = ", ".join(f"`{p}`" for p in (opt.path, *opt.also))
        choices = ", ".join(f"`{c}`" for c in opt.choices or ())
        help_text = opt.help + (f" (bare: `{opt.bare}`)" if opt.bare is not None else "")
        row = (f"`{opt.flag}`", sets, _cell(help_text), choices, _default(opt, one, two))
        rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows) + "\n"


def _scenario_faults(name: str) -> str:
    """The faults a preset runs, where they aim, MirrorMaker's and dc2's own, and
    its consumers' crashes."""
    spec = merge(TestSpec().to_dict(), scenario_layer(name))
    nemesis, mirror = spec["nemesis"], spec["mirror"]
    kinds = list(nemesis["faults"]) + [op["f"] for op in nemesis["schedule"] or []]
    parts = [", ".join(f"`{k}`" for k in dict.fromkeys(kinds))] if kinds else []
    if kinds and nemesis["targets"] != "random":
        parts[0] += f" at `{nemesis['targets']}`"
    parts += [f"`{f}` (MirrorMaker)" for f in mirror["faults"] if mirror["enabled"]]
    parts += [f"`{f}` (dc2)" for f in mirror["dc2_faults"] if mirror["enabled"]]
    if spec["consumer"]["crash_interval_s"]:
        parts.append(f"a consumer crash every {_value(spec['consumer']['crash_interval_s'])} s")
    return "; ".join(parts) or "none"


def scenarios() -> str:
    """Every built-in preset: the verdict it expects, its faults, what it shows."""
    rows = ["| scenario | expects | faults | what it shows |", "|---|---|---|---|"]
    for name, preset in SCENARIOS.items():
        expects = preset["expected_verdict"] or "(a hunt)"
        row = (f"`{name}`", expects, _scenario_faults(name), _cell(preset["description"]))
        rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows) + "\n"


def _targets(kind: FaultKind) -> str:
    if kind.shape == "topology":
        return "the nodes of a topology"
    if kind.shape == "every-node":
        return "every node"
    aims = ["one node"]
    if kind.targetable:
        aims.append("a resolved leader, controller or coordinator")
    if kind.groupable:
        aims.append("a group (`minority`, `all`, or `isr`: a partition's in-sync replicas)")
    return ", or ".join(aims)


def summary(kind: FaultKind) -> str:
    """The kind's ``summary``, else the first line of its class's docstring."""
    doc = (type(kind).__doc__ or "").strip().split("\n\n")[0]
    return kind.summary or " ".join(doc.split())


def faults() -> str:
    """Every registered fault kind: what it does, whom it hits, its parameters' defaults."""
    rows = ["| fault | what it does | targets | parameters' defaults |", "|---|---|---|---|"]
    for name in registry.names():
        kind = registry.kind(name)
        params = ", ".join(f"`{k}={_value(v)}`" for k, v in kind.params({}, name).items())
        row = (f"`{name}`", _cell(summary(kind)), _targets(kind), params or "none")
        rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows) + "\n"


TABLES: dict[str, Callable[[], str]] = {"flags": flags, "scenarios": scenarios, "faults": faults}


def render(text: str) -> str:
    """``text`` with every ``<!-- generated: NAME -->`` block written anew."""

    def table(m: re.Match[str]) -> str:
        if m.group(2) not in TABLES:
            raise ValueError(f"no generated table {m.group(2)!r}; known: {', '.join(TABLES)}")
        return m.group(1) + TABLES[m.group(2)]() + m.group(4)

    return _BLOCK.sub(table, text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="write the flag, scenario and fault tables")
    p.add_argument("docs", type=Path, nargs="*", help=f"default: {' '.join(DOCS)}")
    p.add_argument("--check", action="store_true", help="only say whether they are up to date")
    args = p.parse_args(argv)
    docs = args.docs or [Path(d) for d in DOCS]
    how = "python3 -m kafka_chaos.reference_docs"
    stale = 0
    for doc in docs:
        try:
            fresh = render(doc.read_text())
        except (OSError, ValueError) as e:
            print(f"{doc}: {e}", file=sys.stderr)
            return 2
        stale |= write_or_check(doc, fresh, args.check, how)
    return stale


if __name__ == "__main__":
    sys.exit(main())
