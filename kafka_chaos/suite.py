"""``kafka-chaos suite``: run scenarios in sequence, one JUnit XML and one index page.

A suite file is YAML::

    name: nightly
    store: store                 # optional
    scenarios:
      - scenario: broker-failover          # a preset, optional
        name: broker-failover-kraft        # test name, defaults to the preset
        options: {time_limit_s: 30}        # nested run options, as in a config file
        expect: valid                      # defaults to the preset's, else valid

A scenario passes when its verdict equals its expectation, so a nightly suite
can keep an expected-invalid reproduction (abort-rewind) green while it still
fails, and turn red when behaviour changes.  With no expectation
given, the expectation is "valid": an invalid run fails the suite.
"""

from __future__ import annotations

import logging
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_chaos.child_run import needs_own_process, run_in_child
from kafka_chaos.engine import shared_engine
from kafka_chaos.harness import store as store_mod
from kafka_chaos.harness.errors import ConfigError, HarnessError
from kafka_chaos.harness.spec import TestSpec
from kafka_chaos.options import build_spec, load_mapping
from kafka_chaos.reports.index import write_index
from kafka_chaos.run import RunOutcome, run_test
from kafka_chaos.scenarios import scenario_layer

log = logging.getLogger(__name__)


@dataclass
class SuiteEntry:
    name: str
    layers: list[dict[str, Any]]
    expect: str


@dataclass
class SuiteResult:
    entry: SuiteEntry
    seconds: float
    outcome: RunOutcome | None
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.outcome is not None and self.outcome.verdict == self.entry.expect


def load_suite(path: Path) -> tuple[str, Path | None, list[SuiteEntry]]:
    data = load_mapping(path)
    name = str(data.get("name") or Path(path).stem)
    raw = data.get("scenarios")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{path}: 'scenarios' must be a non-empty list")
    entries = []
    for i, item in enumerate(raw, start=1):
        where = f"{path}: scenarios[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{where}: expected a mapping")
        unknown = set(item) - {"scenario", "name", "options", "expect"}
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        layers: list[dict[str, Any]] = []
        expect = item.get("expect")
        if item.get("scenario"):
            preset = scenario_layer(item["scenario"])
            expect = expect or preset.get("expected_verdict")
            layers.append(preset)
        options = item.get("options") or {}
        if not isinstance(options, dict):
            raise ConfigError(f"{where}: 'options' must be a mapping")
        layers.append(options)
        test_name = item.get("name") or item.get("scenario")
        if not test_name:
            raise ConfigError(f"{where}: give a 'name' or a 'scenario'")
        layers.append({"name": test_name})
        expect = expect or "valid"
        if expect not in ("valid", "invalid", "unknown"):
            raise ConfigError(f"{where}: expect must be valid, invalid or unknown")
        build_spec(*layers)  # validate every entry before running any
        entries.append(SuiteEntry(test_name, layers, expect))
    store = Path(data["store"]) if data.get("store") else None
    return name, store, entries


def run_entry(spec: TestSpec, store: Path) -> RunOutcome:
    """One scenario's run, in a process of its own when it needs one."""
    if needs_own_process(spec):  # a JVM of its own: kafka_chaos/child_run.py
        return run_in_child(spec, store)
    return run_test(spec, store=store)


def run_suite(
    path: Path,
    store: Path | None = None,
    junit: Path | None = None,
    run: Callable[[TestSpec, Path], RunOutcome] = run_entry,
) -> int:
    """Run every scenario, their checks on one shared Spark (kafka_chaos/engine.py)."""
    suite_name, suite_store, entries = load_suite(path)
    store = store or suite_store or store_mod.DEFAULT_STORE
    junit = junit or store / f"{suite_name}-junit.xml"
    with shared_engine():
        results = _run_entries(entries, store, run)
    write_junit(suite_name, results, junit)
    index = write_index(store)
    print(f"junit: {junit}")
    print(f"index: {index}")
    return 0 if len(results) == len(entries) and all(r.passed for r in results) else 1


def _run_entries(
    entries: list[SuiteEntry], store: Path, run: Callable[[TestSpec, Path], RunOutcome]
) -> list[SuiteResult]:
    results: list[SuiteResult] = []
    for entry in entries:
        start = time.monotonic()
        try:
            outcome = run(build_spec(*entry.layers), store)
            results.append(SuiteResult(entry, time.monotonic() - start, outcome))
            if outcome.interrupted:
                break
        except HarnessError as e:
            log.error("%s: %s", entry.name, e)
            results.append(SuiteResult(entry, time.monotonic() - start, None, str(e)))
        r = results[-1]
        verdict = r.outcome.verdict if r.outcome else "error"
        print(f"{entry.name}: {verdict} (expected {entry.expect}) {'PASS' if r.passed else 'FAIL'}")
    return results


def write_junit(suite_name: str, results: list[SuiteResult], path: Path) -> None:
    failures = sum(1 for r in results if r.outcome is not None and not r.passed)
    errors = sum(1 for r in results if r.outcome is None)
    root = ET.Element(
        "testsuite",
        name=suite_name,
        tests=str(len(results)),
        failures=str(failures),
        errors=str(errors),
        time=f"{sum(r.seconds for r in results):.1f}",
    )
    for r in results:
        case = ET.SubElement(
            root, "testcase", classname=suite_name, name=r.entry.name, time=f"{r.seconds:.1f}"
        )
        if r.outcome is None:
            ET.SubElement(case, "error", message=r.error or "harness error")
            continue
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", name="run_dir", value=str(r.outcome.run_dir.path))
        ET.SubElement(props, "property", name="verdict", value=str(r.outcome.verdict))
        if not r.passed:
            message = f"verdict {r.outcome.verdict}, expected {r.entry.expect}"
            failure = ET.SubElement(case, "failure", message=message)
            failure.text = f"{message}\nreport: {r.outcome.report}"
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
