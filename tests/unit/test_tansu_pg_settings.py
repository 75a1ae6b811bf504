"""KC_TANSU_PG_SETTINGS: extra PostgreSQL settings for a Tansu cluster's storage node."""

from __future__ import annotations

import pytest
from kafka_chaos.harness.broker_tansu import pg_settings
from kafka_chaos.harness.errors import ConfigError


def test_items_split_on_semicolons_and_keep_spaces_in_values() -> None:
    text = "log_statement=mod; log_lock_waits=on;log_line_prefix=%m [%p] %x ;"
    assert pg_settings(text) == {
        "log_statement": "mod",
        "log_lock_waits": "on",
        "log_line_prefix": "%m [%p] %x ",
    }


def test_unset_or_empty_is_no_settings() -> None:
    assert pg_settings(None) == {} and pg_settings(" ; ") == {}


@pytest.mark.parametrize("bad", ["log_statement", "=mod", "log statement=mod", "a;b=1"])
def test_an_item_without_a_plain_name_is_one_clear_line(bad: str) -> None:
    with pytest.raises(ConfigError, match="KC_TANSU_PG_SETTINGS: .* is not name=value"):
        pg_settings(bad)
