"""Student's t quantiles, for confidence intervals of a mean over a few seeds (no SciPy dependency)."""

from __future__ import annotations

import math


def _density(x: float, df: int) -> float:
    """The t density with ``df`` degrees of freedom at ``x``."""
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(x * x / df))


def _upper_tail(t: float, df: int, intervals: int = 4000) -> float:
    """P(T > t) for t >= 0: one half minus the density's integral over [0, t] (composite Simpson)."""
    h = t / intervals
    total = _density(0.0, df) + _density(t, df)
    total += sum((4 if k % 2 else 2) * _density(k * h, df) for k in range(1, intervals))
    return 0.5 - total * h / 3


def t_quantile(probability: float, df: int) -> float:
    """The t value below which ``probability`` (in [0.5, 1)) of the distribution lies, to about 1e-6."""
    if not 0.5 <= probability < 1 or df < 1:
        raise ValueError(f"t_quantile needs 0.5 <= probability < 1 and df >= 1, found {probability}, {df}")
    tail = 1 - probability
    low, high = 0.0, 1.0
    while _upper_tail(high, df) > tail:  # bracket: the tail falls as t grows
        low, high = high, 2 * high
    t = (low + high) / 2
    for _ in range(100):  # Newton's method on the tail, kept inside the bracket (bisection when it leaves it)
        excess = _upper_tail(t, df) - tail  # > 0: t is too small
        low, high = (t, high) if excess > 0 else (low, t)
        step = excess / _density(t, df)
        t = t + step if low < t + step < high else (low + high) / 2
        if abs(step) < 1e-10 or high - low < 1e-10:
            break
    return t
