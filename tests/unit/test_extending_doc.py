"""docs/extending.md names places that exist.

Why: the doc tells a contributor the one place a check, a fault and a
workload are declared; a rename that leaves it pointing at nothing should
fail here, not mislead the next reader.  Every backticked dotted name
(``checkers.check.Check``) must import, and every backticked path
(``checkers/hints.py``) must exist in the checkout.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "docs" / "extending.md").read_text()
PACKAGES = ("checkers", "nemeses", "workloads", "harness", "reports", "kafka_chaos", "testkit")

DOTTED = sorted(
    {
        name
        for name in re.findall(r"`([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)`", TEXT)
        if name.split(".")[0] in PACKAGES
    }
)
PATHS = sorted(set(re.findall(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|md|clj))`", TEXT)))


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            found = getattr(found, attr)
        return found
    raise ImportError(dotted)


def test_the_doc_names_places() -> None:
    assert (
        "kafka_chaos.checkers.check.Check" in DOTTED
        and "kafka_chaos.nemeses.kinds.FaultKind" in DOTTED
    )
    assert "checkers/hints.py" in PATHS


@pytest.mark.parametrize("dotted", DOTTED)
def test_every_named_object_exists(dotted: str) -> None:
    assert _resolve(dotted) is not None


@pytest.mark.parametrize("path", PATHS)
def test_every_named_file_exists(path: str) -> None:
    assert (ROOT / path).is_file(), path
