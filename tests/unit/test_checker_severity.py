"""Severities follow the run's configuration (docs/results.md)."""

from checkers.results import severities
from harness.spec import TestSpec


def test_defaults_make_every_safety_anomaly_an_error():
    sev = severities({"producer": {"acks": "all", "enable_idempotence": True}})
    assert set(sev.values()) == {"error"}


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
