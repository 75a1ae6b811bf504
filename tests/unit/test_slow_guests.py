"""Client timeouts scaled for slow guests (kafka_chaos/slow_guests.py)."""

from __future__ import annotations

from kafka_chaos.harness.spec import TestSpec

from kafka_chaos.slow_guests import CLIENT_TIMEOUTS, scale_config


def test_a_host_speed_cluster_changes_nothing() -> None:
    config = TestSpec().to_dict()
    assert scale_config(config, 1.0) is config


def test_slow_guests_scale_every_client_timeout_and_record_the_factor() -> None:
    config = TestSpec().to_dict()
    scaled = scale_config(config, 20.0)
    assert scaled["guest_time_scale"] == 20.0
    for section, key in CLIENT_TIMEOUTS:
        before = config[key] if section is None else config[section][key]
        after = scaled[key] if section is None else scaled[section][key]
        assert after == before * 20 and type(after) is type(before), key
    assert config["producer"]["delivery_timeout_ms"] == 15000  # the input is untouched
    # Everything else stays, and the result is still a valid run config.
    untouched = {k for k in config if k not in {"producer", "consumer", "txn", "checker"}}
    assert {k: scaled[k] for k in untouched - {"final_drain_timeout_s"}} == {
        k: config[k] for k in untouched - {"final_drain_timeout_s"}
    }
    spec = TestSpec.from_dict(scaled)
    assert spec.producer.delivery_timeout_ms == 300_000 and spec.producer.rate == 1000.0
