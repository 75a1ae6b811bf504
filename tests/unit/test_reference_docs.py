"""The docs' flag, scenario and fault tables are the code's, and a stale one fails here.

docs/reference.md, docs/scenarios.md and docs/faults.md hold tables written by
``kafka_chaos.reference_docs`` from ``options.every_option()``, ``scenarios.SCENARIOS``
and the fault registry (as docs/results.md's are from the check catalog,
tests/unit/test_new_check.py).  A flag, preset or fault added without
regenerating them fails ``test_generated_docs_are_fresh``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_chaos.nemeses import registry

from kafka_chaos import reference_docs
from kafka_chaos.options import every_option
from kafka_chaos.scenarios import SCENARIOS
from testkit.fault_example import NAME, Marker

ROOT = Path(__file__).resolve().parents[2]
TABLES = ("flags", "scenarios", "faults")


@pytest.mark.parametrize("doc", reference_docs.DOCS)
def test_generated_docs_are_fresh(doc: str) -> None:
    text = (ROOT / doc).read_text()
    assert "<!-- generated: " in text, f"{doc} lost its generated table"
    assert reference_docs.render(text) == text, "run: python3 -m kafka_chaos.reference_docs"


def test_every_flag_scenario_and_fault_has_its_row() -> None:
    flags, scenarios, faults = (reference_docs.TABLES[t]() for t in TABLES)
    assert all(f"| `{opt.flag}` |" in flags for opt in every_option())
    assert all(f"| `{name}` |" in scenarios for name in SCENARIOS)
    assert all(f"| `{name}` |" in faults for name in registry.names())


def test_a_fault_registered_elsewhere_makes_the_fault_table_stale() -> None:
    doc = (ROOT / "docs" / "faults.md").read_text()
    registry.register(Marker())
    try:
        fresh = reference_docs.render(doc)
        assert fresh != doc
        row = f"| `{NAME}` | A marker file on each target node while the fault lasts;"
        assert row in fresh  # no summary: the first line of its docstring
    finally:
        registry.unregister(NAME)
    assert reference_docs.render(doc) == doc


def test_defaults_come_from_the_spec_and_a_drawn_one_says_so() -> None:
    flags = reference_docs.flags()
    assert "| `--seed` | `seed` |" in flags and "| random, recorded |" in flags
    time_limit = next(o for o in every_option() if o.flag == "--time-limit")
    row = next(line for line in flags.splitlines() if line.startswith("| `--time-limit`"))
    assert row.endswith(" | 60 |") and time_limit.help in row
    assert reference_docs._cell("a | b\nc") == "a \\| b c"  # a help text cannot break a row


def test_check_names_the_stale_file_and_the_command(tmp_path: Path, capsys) -> None:
    doc = tmp_path / "faults.md"
    doc.write_text("# Faults\n\n<!-- generated: faults -->\nold\n<!-- /generated -->\n")
    assert reference_docs.main([str(doc), "--check"]) == 1
    err = capsys.readouterr().err
    assert str(doc) in err and "python3 -m kafka_chaos.reference_docs" in err
    assert reference_docs.main([str(doc)]) == 0
    assert "| `kill` |" in doc.read_text()
    assert reference_docs.main([str(doc), "--check"]) == 0


def test_an_unknown_table_or_file_is_one_line(tmp_path: Path, capsys) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("<!-- generated: nonsense -->\n<!-- /generated -->\n")
    assert reference_docs.main([str(doc), "--check"]) == 2
    assert "no generated table 'nonsense'" in capsys.readouterr().err
    assert reference_docs.main([str(tmp_path / "absent.md"), "--check"]) == 2
