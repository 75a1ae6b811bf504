"""Severities follow the run's configuration (docs/results.md)."""

from kafka_chaos.checkers.catalog import checks_for, severities
from kafka_chaos.checkers.txn.cycle_checks import CYCLE_CHECKS
from kafka_chaos.harness.spec import TestSpec


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


LOSS = ("lost-write", "unseen", "acked-lost", "inconsistent-offsets")


def test_acks_0_promises_nothing_about_loss():
    sev = severities({"producer": {"acks": "0", "enable_idempotence": False}})
    assert {sev[n] for n in LOSS} == {"warning"}


def test_acks_1_allows_loss_when_the_leader_fails():
    """ProducerConfig's acks doc: with acks=1 a record the leader acked alone "will be lost"
    if it fails before its followers copy it, and its offset is then another value's."""
    sev = severities({"producer": {"acks": "1", "enable_idempotence": False}})
    assert {sev[n] for n in LOSS} == {"warning"}
    durable = severities({"producer": {"acks": "all", "enable_idempotence": False}})
    assert {durable[n] for n in LOSS} == {"error"}


def test_unclean_election_allows_loss_whichever_way_it_is_set():
    """unclean.leader.election.enable's doc: "doing so may result in data loss"."""
    for topic in (
        {"unclean_leader_election": True},
        {"config": {"unclean.leader.election.enable": "true"}},
    ):
        sev = severities({"topic": topic})
        assert {sev[n] for n in LOSS} == {"warning"}, topic
        # Loss, and reads that go back or jump once the log was truncated under a
        # consumer (its position reset): the rest of the promises stand.
        assert sev["nonmonotonic-poll"] == sev["poll-skip"] == "warning", topic
        assert (
            sev["duplicate"]
            == sev["failed-write-read"]
            == sev["group-commit-past-unread"]
            == "error"
        )
    # topic.config wins over the field, as harness.admin.topic_config applies it.
    off = severities(
        {
            "topic": {
                "unclean_leader_election": True,
                "config": {"unclean.leader.election.enable": "false"},
            }
        }
    )
    assert {off[n] for n in LOSS} == {"error"}
    assert off["nonmonotonic-poll"] == off["poll-skip"] == "error"


def test_a_duplicate_of_an_unacknowledged_send_breaks_only_librdkafkas_promise():
    """librdkafka: "a message is only written to the log once", acknowledged or not; the
    Java producer: idempotence within one session, and a check for a duplicate after a
    send returns an error.  An acknowledged value written twice is an error either way."""
    librdkafka = severities({"producer": {"client": "librdkafka"}})
    java = severities({"producer": {"client": "java"}})
    assert librdkafka["duplicate-unacked"] == "error"
    assert java["duplicate-unacked"] == "warning"
    assert librdkafka["duplicate"] == java["duplicate"] == "error"
    for client in ("librdkafka", "java"):
        off = severities({"producer": {"client": client, "enable_idempotence": False}})
        assert off["duplicate-unacked"] == off["duplicate"] == "info"


def test_mirror_maker_promises_partitioning_not_order():
    sev = severities({"workload": "mirror"})
    assert sev["mirror-partition"] == "error"
    assert sev["mirror-order"] == "warning"


def test_ownership_gaps_under_faults_are_liveness_not_safety():
    with_faults = TestSpec().to_dict()
    assert severities(with_faults)["group-unowned"] == "warning"
    no_faults = TestSpec().to_dict()
    no_faults["nemesis"]["faults"] = []
    assert severities(no_faults)["group-unowned"] == "error"
    assert severities(with_faults)["group-double-ownership"] == "error"


def _names(config: dict) -> list[str]:
    return [c.name for c in checks_for(config)]
