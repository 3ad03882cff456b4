"""The sequential paired verdict (farm/ondevice_farm/analysis/paired.py): the verdict rules, one
verdict's figures against independently computed values, the spending and the budget projection.
Its error rates and power under looking after every round: test_paired_error_rates.py."""

from __future__ import annotations

import math

import pytest

from ondevice_farm.analysis.paired import (
    MIN_STANDARD_ERROR,
    PairedPolicy,
    classify,
    judge,
    rounds_to_decide,
)

from .test_student_t import quantile, upper_tail

POLICY = PairedPolicy(alpha=0.05, min_effect=0.03)


def test_verdict_rules() -> None:
    bound = math.log1p(0.03)
    assert classify(0.0, -0.01, 0.01, 0.03) == "same"
    assert classify(0.1, 0.05, 0.15, 0.03) == "slower"
    assert classify(-0.1, -0.15, -0.05, 0.03) == "faster"
    # certainly slower, but by less than the minimum effect so far: keep measuring
    assert classify(bound * 0.8, 0.001, bound * 1.6, 0.03) == "inconclusive"
    assert classify(0.0, -0.05, 0.05, 0.03) == "inconclusive"
    # the gate off (min_effect 0, as the error-rate tests run it): decided exactly when the interval
    # leaves 0, and never `same`
    assert classify(0.01, 1e-9, 0.02, 0.0) == "slower"
    assert classify(-0.01, -0.02, -1e-9, 0.0) == "faster"
    assert classify(0.01, 0.0, 0.02, 0.0) == "inconclusive"
    assert classify(0.0, -1e-9, 1e-9, 0.0) == "inconclusive"


def test_judge_reports_ratio_interval_and_geometric_means() -> None:
    """Five rounds of one ratio (1.1): no spread, so the standard error is its floor (1e-4) and the
    interval is 1.1 * exp(+/- t_{1 - a_5/2, 4} * 1e-4), a_5 = 0.05 * 5 / 30 at the first look; the
    p-value is that look's two-sided p times 30 / 5."""
    pairs = [(2.0, 2.2), (4.0, 4.4), (3.0, 3.3), (2.5, 2.75), (5.0, 5.5)]
    verdict = judge(pairs, POLICY)
    spend = 0.05 * 5 / 30
    half = quantile(1.0 - spend / 2.0, 4) * MIN_STANDARD_ERROR
    assert verdict.ratio == pytest.approx(1.1, rel=1e-12)
    assert (verdict.ci_low, verdict.ci_high) == pytest.approx(
        (1.1 * math.exp(-half), 1.1 * math.exp(half)), rel=1e-9
    )
    assert verdict.level == pytest.approx(1.0 - spend)
    t = math.log(1.1) / MIN_STANDARD_ERROR
    assert verdict.p_value == pytest.approx(2.0 * upper_tail(t, 4) * 30 / 5, rel=1e-3)
    assert verdict.baseline_p50_ms == pytest.approx(math.exp(sum(math.log(a) for a, _ in pairs) / 5))
    assert verdict.candidate_p50_ms == pytest.approx(1.1 * verdict.baseline_p50_ms)
    assert verdict.sd_log_ratio == pytest.approx(0.0, abs=1e-12)
    assert verdict.verdict == "slower"  # identical ratios: the standard error's floor, not zero
    assert judge(pairs[:4], POLICY).verdict == "inconclusive"  # before the first look
    document = verdict.to_dict()
    assert document["interval"] == [verdict.ci_low, verdict.ci_high]
    assert (document["p_value"], document["rounds"], document["level"]) == (verdict.p_value, 5, verdict.level)


def test_spending_sums_to_alpha() -> None:
    policy = PairedPolicy(alpha=0.01, min_effect=0.03, min_rounds=3)
    assert sum(policy.look_alpha(n) for n in range(1, 200_000)) == pytest.approx(0.01, rel=1e-4)
    assert policy.for_family(10).alpha == pytest.approx(0.001)


def _steady(rounds: int, mean: float, spread: float) -> list[tuple[float, float]]:
    """Rounds whose log ratios alternate mean +/- spread: the same ratio and spread at any length."""
    return [(5.0, 5.0 * math.exp(mean + spread * (-1) ** i)) for i in range(rounds)]


def test_rounds_to_decide_projects_beyond_the_rounds_run() -> None:
    """At 8 rounds of mean 0.06 and sd 0.08 * sqrt(8 / 7), the projection is the least n > 8 whose
    look would decide (mean - t_{1 - a_n/2, n-1} * sd / sqrt(n) > 0, a_n = 0.05 * 5 / (n (n + 1)): the
    ratio already exceeds the minimum effect), found here with the closed-form t."""
    verdict = judge(_steady(8, 0.06, 0.08), POLICY)
    assert verdict.verdict == "inconclusive"
    sd = 0.08 * math.sqrt(8 / 7)
    expected = next(
        n
        for n in range(9, 100)
        if 0.06 - quantile(1.0 - 0.05 * 5 / (n * (n + 1)) / 2.0, n - 1) * sd / math.sqrt(n) > 0.0
    )
    needed = rounds_to_decide(verdict, POLICY)
    assert needed == expected
    # measured at that length with the same ratio and spread, the rounds do decide (an even count
    # keeps the alternating pattern's mean exact)
    even = needed + needed % 2
    assert judge(_steady(even, 0.06, 0.08), POLICY).verdict == "slower"
    assert judge(_steady(even - 6, 0.06, 0.08), POLICY).verdict == "inconclusive"
    hopeless = judge([(1.0, 1.029 * math.exp(0.5 * (-1) ** i)) for i in range(10)], POLICY)
    assert rounds_to_decide(hopeless, POLICY) is None  # just inside the bound, a 50% spread
