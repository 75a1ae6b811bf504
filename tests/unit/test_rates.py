"""Reproduction rates with Wilson intervals, checked against published values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka_chaos.harness.rates import comparison_text, fisher_p, rate_text, wilson


def test_known_intervals() -> None:
    # Wilson's interval for 0/10 is [0, 0.2775]; for 5/10, [0.2366, 0.7634] (z = 1.96).
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert rate_text(1, 8) == "1 of 8 (12%; 95% interval 2-47%)"


@given(st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_the_interval_holds_the_rate_and_stays_in_bounds(case) -> None:
    hits, n = case
    lo, hi = wilson(hits, n)
    assert 0.0 <= lo <= hits / n <= hi <= 1.0


def test_impossible_counts_are_refused() -> None:
    with pytest.raises(ValueError):
        wilson(3, 2)
    with pytest.raises(ValueError):
        wilson(0, 0)


def test_fisher_exact_known_values() -> None:
    # 3 of 8 against 0 of 8: each extreme table has C(8,3)/C(16,3) = 0.1, two-sided 0.2.
    assert fisher_p(3, 8, 0, 8) == pytest.approx(0.2, abs=1e-9)
    # 5 of 5 against 0 of 5: 2 / C(10,5) = 0.0079.
    assert fisher_p(5, 5, 0, 5) == pytest.approx(2 / 252, abs=1e-9)
    assert fisher_p(1, 5, 0, 5) == pytest.approx(1.0)
    assert comparison_text("librdkafka", 3, 8, "java", 0, 8) == (
        "librdkafka 3/8 vs java 0/8: Fisher p = 0.2, no evidence of a difference"
    )
    assert comparison_text("librdkafka", 5, 5, "java", 0, 5).endswith("a difference (p < 0.05)")


@given(st.integers(1, 40), st.integers(1, 40), st.data())
def test_fisher_p_is_a_probability_and_symmetric(n_a, n_b, data) -> None:
    a = data.draw(st.integers(0, n_a))
    b = data.draw(st.integers(0, n_b))
    p = fisher_p(a, n_a, b, n_b)
    assert 0.0 < p <= 1.0 + 1e-12
    assert p == pytest.approx(fisher_p(b, n_b, a, n_a))


def test_fisher_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError):
        fisher_p(3, 2, 0, 1)
