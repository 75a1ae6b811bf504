"""Suite files, JUnit XML and the run store layout."""

import xml.etree.ElementTree as ET

import pytest
from kafka_chaos.harness import store as store_mod
from kafka_chaos.harness.broker import DEFAULT
from kafka_chaos.harness.errors import ConfigError, HarnessError

from kafka_chaos.run import RunOutcome
from kafka_chaos.scenarios import SCENARIOS
from kafka_chaos.suite import SuiteEntry, SuiteResult, load_suite, write_junit


def test_sample_nightly_suite_loads():
    name, _store, entries = load_suite(store_mod.Path(__file__).parents[2] / "suites/nightly.yaml")
    assert name == "nightly"
    expects = {e.name: e.expect for e in entries}
    # Its loss is a warning now: unclean.leader.election.enable's doc allows it.
    assert expects["unclean-leader-election"] == "valid"
    assert expects["unclean-leader-election-safe"] == "valid"
    assert expects["kill-partition-kraft"] == "valid"
    # Every Kafka preset, so every family of checks, runs nightly; the hunts are measured
    # apart, and another broker's presets need its own setup (./setup.sh --tansu).
    other_broker = {
        s for s, p in SCENARIOS.items() if p.get("cluster", {}).get("broker", DEFAULT) != DEFAULT
    }
    assert other_broker == {"tansu-broker-kill", "tansu-storage-partition", "tansu-idempotent"}
    assert set(SCENARIOS) - set(expects) == {s for s in SCENARIOS if "hunt" in s} | other_broker
    assert {"txn-pause-hunt", "hunt-txn-stale-endtxn", "hunt-share-failover"} <= set(SCENARIOS)


def test_suite_errors_name_the_entry(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("scenarios:\n  - scenario: broker-failover\n  - options: {}\n")
    with pytest.raises(ConfigError, match=r"scenarios\[2\]: give a 'name' or a 'scenario'"):
        load_suite(path)
    path.write_text("scenarios:\n  - name: x\n    option: {}\n")
    with pytest.raises(ConfigError, match=r"scenarios\[1\]: unknown key\(s\) option"):
        load_suite(path)


def test_junit_marks_unexpected_verdicts_as_failures(tmp_path):
    run = store_mod.new_run_dir(tmp_path, "t")
    ok = SuiteResult(SuiteEntry("a", [], "valid"), 1.0, RunOutcome(run, "valid", None))
    bad = SuiteResult(SuiteEntry("b", [], "valid"), 2.0, RunOutcome(run, "invalid", None))
    repro = SuiteResult(SuiteEntry("c", [], "invalid"), 3.0, RunOutcome(run, "invalid", None))
    err = SuiteResult(SuiteEntry("d", [], "valid"), 0.5, None, "node n1 unreachable")
    path = tmp_path / "junit.xml"
    write_junit("nightly", [ok, bad, repro, err], path)
    root = ET.parse(path).getroot()
    assert root.get("tests") == "4"
    assert root.get("failures") == "1"
    assert root.get("errors") == "1"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["a"].find("failure") is None
    assert "expected valid" in cases["b"].find("failure").get("message")
    assert cases["c"].find("failure") is None
    assert cases["d"].find("error").get("message") == "node n1 unreachable"


def test_run_dirs_are_unique_and_latest_points_at_newest(tmp_path):
    a = store_mod.new_run_dir(tmp_path, "queue")
    b = store_mod.new_run_dir(tmp_path, "queue")
    assert a.path != b.path
    (b.path / "config.json").write_text("{}")
    store_mod.point_latest(tmp_path, b)
    assert (tmp_path / "latest").resolve() == b.path.resolve()
    assert store_mod.resolve_run_dir(tmp_path / "latest").path == b.path.resolve()


def test_bad_run_dirs_are_named(tmp_path):
    with pytest.raises(HarnessError, match="not a run directory"):
        store_mod.resolve_run_dir(tmp_path)
    with pytest.raises(HarnessError, match="invalid test name"):
        store_mod.new_run_dir(tmp_path, "../x")
