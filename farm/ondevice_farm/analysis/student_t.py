"""Student's t distribution without scipy: tail probability and quantile.

The regularized incomplete beta function by its continued fraction (modified Lentz), as in
Press et al., Numerical Recipes, 3rd ed., section 6.4; the quantile by bisection on the tail.
"""

from __future__ import annotations

import functools
import math

_EPS = 1e-14
_TINY = 1e-300
_MAX_TERMS = 300


def _beta_fraction(a: float, b: float, x: float) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS + 1):
        m2 = 2 * m
        even = m * (b - m) * x / ((qam + m2) * (a + m2))
        odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        for aa in (even, odd):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def regularized_beta(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with `df` degrees of freedom (normal where df is infinite)."""
    if not math.isfinite(df):
        return 0.5 * math.erfc(t / math.sqrt(2.0))
    tail = 0.5 * regularized_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


@functools.lru_cache(maxsize=4096)
def _quantile(p: float, df: float) -> float:
    low, high = -1e3, 1e3
    for _ in range(64):
        mid = (low + high) / 2.0
        if 1.0 - t_sf(mid, df) < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (df rounded to 0.1: intervals do not need more, and it caches)."""
    if not 0.0 < p < 1.0:
        raise ValueError("a quantile needs 0 < p < 1")
    return _quantile(p, round(df, 1))
