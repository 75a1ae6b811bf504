"""No product package branches on the workload's name: it asks the declaration.

A workload is one declared unit (workloads/registry.py ``Declaration``): a
``spec.workload == "txn"`` somewhere else is a second place a new workload
would have to be added, which nobody finds until it misbehaves.  This reads
the product packages' code (not their comments or strings) for a comparison
of a workload name with a string.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Every product package, found rather than listed: a new one (forensics/ was) is read too.
PRODUCT = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name != "testkit")
DECLARATIONS = Path("workloads/registry.py")


def _names_workload(node: ast.expr) -> bool:
    """``x.workload``, ``workload``, ``x["workload"]`` or ``x.get("workload")``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "workload"
    if isinstance(node, ast.Name):
        return node.id == "workload"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "workload"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        first = node.args[0] if node.args else None
        return (
            node.func.attr == "get"
            and isinstance(first, ast.Constant)
            and first.value == "workload"
        )
    return False


def _is_text(node: ast.expr) -> bool:
    """A string constant, or a tuple, list or set of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_is_text(e) for e in node.elts)
    return False


def _matches_text(pattern: ast.pattern) -> bool:
    """A ``case "txn":`` (or ``case "queue" | "share":``) of a match statement."""
    if isinstance(pattern, ast.MatchValue):
        return _is_text(pattern.value)
    if isinstance(pattern, ast.MatchOr):
        return any(_matches_text(p) for p in pattern.patterns)
    return False


def dispatches(source: str) -> list[int]:
    """The lines of ``source`` that compare a workload name with a string."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Match) and _names_workload(node.subject):
            if any(_matches_text(case.pattern) for case in node.cases):
                found.append(node.lineno)
            continue
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for a, b in zip(sides, sides[1:], strict=False):
            if (_names_workload(a) and _is_text(b)) or (_names_workload(b) and _is_text(a)):
                found.append(node.lineno)
                break
    return sorted(found)


def test_the_reader_finds_each_form_of_dispatch() -> None:
    code = "\n".join(
        [
            'if spec.workload == "txn": pass',
            'if "mirror" != config.workload: pass',
            'if workload in ("queue", "txn"): pass',
            'if config["workload"] not in {"mirror"}: pass',
            'if config.get("workload", "queue") == "queue": pass',
            'if spec.consumer.mode == "share": pass',
            "if spec.workload == other: pass",
            "match spec.workload:\n    case 'queue' | 'mirror': pass",
            "match spec.workload:\n    case other: pass",
        ]
    )
    assert dispatches(code) == [1, 2, 3, 4, 5, 8]


def test_no_product_package_dispatches_on_the_workload_name() -> None:
    assert {"forensics", "kafka_chaos", "workloads"} <= set(PRODUCT)
    found = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel != DECLARATIONS:
                found += [f"{rel}:{n}" for n in dispatches(path.read_text(encoding="utf-8"))]
    assert found == [], "ask workloads.registry.declared(...) instead: " + ", ".join(found)
