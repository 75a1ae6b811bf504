"""Reproduction rates: how often a run's anomaly comes back, with its uncertainty.

A flaky finding reproduced k times in n runs is reported as k/n with a 95 %
Wilson score interval, which stays inside [0, 1] and is honest at k = 0 or
k = n, where the normal approximation collapses to a point.  Four lines of
arithmetic: not worth scipy or statsmodels as a dependency.
"""

from __future__ import annotations

import math


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
