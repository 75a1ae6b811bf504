"""Reproduction rates with Wilson intervals, checked against published values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.rates import rate_text, wilson


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
