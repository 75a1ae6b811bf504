"""Severities follow the run's configuration (docs/results.md)."""

from checkers.catalog import checks_for, severities
from checkers.cycle_checks import CYCLE_CHECKS
from harness.spec import TestSpec


def test_defaults_make_every_safety_anomaly_an_error():
    config = {"producer": {"acks": "all", "enable_idempotence": True}}
    sev = severities(config)
    assert {sev[name] for name in _names(config)} == {"error"}


def test_a_txn_run_allows_only_what_jepsen_allows():
    """Interleaved sends and ww-inferred cycles are legal; the rest breaks a promise,
    and without ww edges G1c does too (G0 needs ww edges, so it cannot occur)."""
    config = {"workload": "txn", "txn": {"mode": "ctp"}}
    sev = severities(config)
    legal = {"int-send-skip", *CYCLE_CHECKS}
    assert {n for n in _names(config) if sev[n] != "error"} == legal
    assert {sev[n] for n in legal} == {"info"}
    no_ww = severities({**config, "checker": {"ww_deps": False}})
    assert {n for n in CYCLE_CHECKS if no_ww[n] == "error"} == {
        "G1c",
        "G1c-process",
        "G1c-realtime",
    }


def test_without_idempotence_duplicates_are_legal():
    sev = severities({"producer": {"acks": "all", "enable_idempotence": False}})
    assert sev["duplicate"] == "info"
    assert sev["lost-write"] == "error"


def test_acks_0_promises_nothing_about_loss():
    sev = severities({"producer": {"acks": "0", "enable_idempotence": False}})
    assert sev["lost-write"] == sev["unseen"] == "warning"


def test_ownership_gaps_under_faults_are_liveness_not_safety():
    with_faults = TestSpec().to_dict()
    assert severities(with_faults)["group-unowned"] == "warning"
    no_faults = TestSpec().to_dict()
    no_faults["nemesis"]["faults"] = []
    assert severities(no_faults)["group-unowned"] == "error"
    assert severities(with_faults)["group-double-ownership"] == "error"


def _names(config: dict) -> list[str]:
    return [c.name for c in checks_for(config)]
