"""Reproduction rates: how often a run's anomaly comes back, with its uncertainty.

A flaky finding reproduced k times in n runs is reported as k/n with a 95 %
Wilson score interval, which stays inside [0, 1] and is honest at k = 0 or
k = n, where the normal approximation collapses to a point.  Four lines of
arithmetic: not worth scipy or statsmodels as a dependency.

Whether two rates differ (librdkafka 3 of 8 against Java 0 of 8) is a
different question, and one whose exact answer is easy to get subtly wrong
by hand (the two-sided sum over tables no likelier than the one observed,
with ties): that is scipy's ``fisher_exact``, already a dependency.
"""

from __future__ import annotations

import math

from scipy.stats import fisher_exact


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of the rate ``hits / n`` (95 % at z = 1.96)."""
    if n <= 0 or not 0 <= hits <= n:
        raise ValueError(f"need 0 <= hits <= n and n > 0, got {hits} of {n}")
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    lo = 0.0 if hits == 0 else max(0.0, centre - half)  # exact at the ends: no rounding
    hi = 1.0 if hits == n else min(1.0, centre + half)
    return lo, hi


def rate_text(hits: int, n: int) -> str:
    """``"2 of 5 (40%; 95% interval 12-77%)"``."""
    lo, hi = wilson(hits, n)
    return f"{hits} of {n} ({hits / n:.0%}; 95% interval {lo * 100:.0f}-{hi * 100:.0f}%)"


def fisher_p(hits_a: int, n_a: int, hits_b: int, n_b: int) -> float:
    """Two-sided Fisher exact p that rates ``hits_a / n_a`` and ``hits_b / n_b`` are one rate.

    Why exact: attribution grids have 5-20 runs a cell, far too few for a
    chi-squared approximation.  A claim that one client (or version) differs
    from another needs p < 0.05 (docs/benchmarks.md, "Whose is it").
    """
    for hits, n in ((hits_a, n_a), (hits_b, n_b)):
        if n <= 0 or not 0 <= hits <= n:
            raise ValueError(f"need 0 <= hits <= n and n > 0, got {hits} of {n}")
    table = [[hits_a, n_a - hits_a], [hits_b, n_b - hits_b]]
    return float(fisher_exact(table, alternative="two-sided").pvalue)


def comparison_text(
    label_a: str, hits_a: int, n_a: int, label_b: str, hits_b: int, n_b: int
) -> str:
    """``"librdkafka 3/8 vs java 0/8: Fisher p = 0.2, no evidence of a difference"``."""
    p = fisher_p(hits_a, n_a, hits_b, n_b)
    verdict = "a difference (p < 0.05)" if p < 0.05 else "no evidence of a difference"
    return f"{label_a} {hits_a}/{n_a} vs {label_b} {hits_b}/{n_b}: Fisher p = {p:.2g}, {verdict}"
