"""Student's t without scipy (farm/ondevice_farm/analysis/student_t.py) against values that owe it
nothing: a printed table's quantiles, and the closed-form t distribution of integer degrees of
freedom (Abramowitz & Stegun 26.7.3 and 26.7.4), which the compare's interval and p-value use at df
= rounds - 1."""

from __future__ import annotations

import math

import pytest

from ondevice_farm.analysis.student_t import t_quantile, t_sf

#: two-sided 5% and 1% points, t_{0.975} and t_{0.995}, as any statistics table prints them
#: (e.g. NIST/SEMATECH e-Handbook of Statistical Methods, section 1.3.6.7.2)
TABLE = {
    1: (12.706, 63.657),
    2: (4.303, 9.925),
    5: (2.571, 4.032),
    10: (2.228, 3.169),
    30: (2.042, 2.750),
}


def central(t: float, df: int) -> float:
    """P(|T| <= t), t >= 0, for Student's t with an integer df: the finite series in theta =
    atan(t / sqrt(df)) (Abramowitz & Stegun 26.7.3 for odd df, 26.7.4 for even)."""
    theta = math.atan(t / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2 == 0:
        term, total = 1.0, 1.0
        for k in range(1, df // 2):  # terms (1*3*...*(2k-1)) / (2*4*...*2k) cos^2k
            term *= (2 * k - 1) / (2 * k) * c * c
            total += term
        return s * total
    if df == 1:
        return 2.0 * theta / math.pi
    term, total = c, c
    for k in range(1, (df - 1) // 2):  # terms (2*4*...*2k) / (3*5*...*(2k+1)) cos^(2k+1)
        term *= (2 * k) / (2 * k + 1) * c * c
        total += term
    return 2.0 / math.pi * (theta + s * total)


def upper_tail(t: float, df: int) -> float:
    """P(T > t), independently of the product: from `central`."""
    tail = (1.0 - central(abs(t), df)) / 2.0
    return tail if t >= 0 else 1.0 - tail


def quantile(p: float, df: int) -> float:
    """The t with P(T <= t) = p, p > 1/2, by bisection on `upper_tail`."""
    low, high = 0.0, 1e4
    for _ in range(200):
        mid = (low + high) / 2.0
        low, high = (mid, high) if upper_tail(mid, df) > 1.0 - p else (low, mid)
    return (low + high) / 2.0


def test_the_closed_form_itself_gives_the_table() -> None:
    for df, (q975, q995) in TABLE.items():
        assert quantile(0.975, df) == pytest.approx(q975, abs=6e-4)
        assert quantile(0.995, df) == pytest.approx(q995, abs=6e-4)
    assert upper_tail(1.0, 1) == pytest.approx(0.25)  # the Cauchy: atan(1) = pi / 4
    assert upper_tail(2.0, 2) == pytest.approx(0.5 - 1.0 / math.sqrt(6.0))  # 1/2 - t / (2 sqrt(2 + t^2))


@pytest.mark.parametrize("df", sorted(TABLE))
def test_t_quantile_is_the_table(df: int) -> None:
    q975, q995 = TABLE[df]
    assert t_quantile(0.975, df) == pytest.approx(q975, abs=6e-4)
    assert t_quantile(0.995, df) == pytest.approx(q995, abs=6e-4)
    assert t_quantile(0.025, df) == pytest.approx(-q975, abs=6e-4)


def test_t_sf_is_the_closed_form() -> None:
    """Across the compare's degrees of freedom (rounds - 1, 4 to 199) and into the far tail a look
    reaches (its two-sided error is down to alpha * 5 / (200 * 201) = 1.2e-6)."""
    for df in (1, 2, 3, 4, 5, 8, 19, 30, 61, 120, 199):
        for t in (0.0, 0.3, 1.0, 1.96, 2.5, 4.0, 6.0, 9.0, 25.0):
            expected = upper_tail(t, df)
            assert t_sf(t, df) == pytest.approx(expected, rel=1e-9, abs=1e-15), (t, df)
            assert t_sf(-t, df) == pytest.approx(1.0 - expected, rel=1e-9), (t, df)


def test_t_quantile_is_the_closed_form_at_the_compare_looks() -> None:
    """The quantiles the compare's looks use, 1 - alpha_n / 2 at df n - 1 (alpha 0.01, n0 5): at n = 5
    the look's two-sided error is 0.01 * 5 / 30, at n = 200 it is 1.2e-6."""
    for n in (5, 6, 7, 10, 20, 50, 100, 200):
        p = 1.0 - 0.01 * 5 / (n * (n + 1)) / 2.0
        assert t_quantile(p, n - 1) == pytest.approx(quantile(p, n - 1), rel=1e-7), n
    # the first look's quantile as scipy.stats.t.ppf (1.17.1) gives it
    assert t_quantile(1.0 - 0.01 * 5 / 30 / 2.0, 4) == pytest.approx(7.528671, abs=1e-5)
