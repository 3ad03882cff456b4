"""The sequential paired verdict (farm/ondevice_farm/analysis/paired.py) on simulated rounds: its error rates
under looking after every round, its power, the verdict rules and the budget projection."""

from __future__ import annotations

import math
import random

import pytest

from ondevice_farm.analysis.paired import (
    PairedPolicy,
    classify,
    judge,
    log_ratios,
    rounds_to_decide,
)

POLICY = PairedPolicy(alpha=0.05, min_effect=0.03)


def _stream(rng: random.Random, effect: float, sd: float, drift_sd: float = 0.1) -> list[tuple[float, float]]:
    """A round's two sessions share the round's drift (a level that moves, as a night's does)."""
    pairs = []
    for _ in range(400):
        a = 5.0 * math.exp(rng.gauss(0.0, drift_sd))
        pairs.append((a, a * math.exp(math.log1p(effect) + rng.gauss(0.0, sd))))
    return pairs


def _sequential(pairs: list[tuple[float, float]], policy: PairedPolicy, max_rounds: int) -> tuple[str, int]:
    """Looks after every round, stops at the first decision: the way a unit runs the rounds."""
    for n in range(policy.min_rounds, max_rounds + 1):
        verdict = judge(pairs[:n], policy).verdict
        if verdict != "inconclusive":
            return verdict, n
    return "inconclusive", max_rounds


def test_looking_after_every_round_keeps_the_false_alarm_rate() -> None:
    """A/A streams with a hair-trigger threshold (alpha 0.2, no minimum effect) looked at after every
    round: a fixed-level t test at every look would cross in most streams; the spending keeps it
    under alpha. `same` needs min_effect > 0, so with 0 only a false slower/faster can stop."""
    policy = PairedPolicy(alpha=0.2, min_effect=0.0)
    rng = random.Random(7)
    trials, max_rounds = 300, 60
    alarms = sum(
        _sequential(_stream(rng, 0.0, 0.05), policy, max_rounds)[0] != "inconclusive" for _ in range(trials)
    )
    assert alarms / trials <= 0.2
    # the same streams judged by a naive fixed-level test at every look do alarm far more often
    naive = PairedPolicy(alpha=0.2, min_effect=0.0)
    rng = random.Random(7)
    naive_alarms = 0
    for _ in range(trials):
        d = log_ratios(_stream(rng, 0.0, 0.05)[:max_rounds])
        for n in range(3, max_rounds + 1):
            mean = sum(d[:n]) / n
            sd = math.sqrt(sum((v - mean) ** 2 for v in d[:n]) / (n - 1))
            if abs(mean) / (sd / math.sqrt(n)) > 1.3:  # ~ the two-sided 20% t quantile
                naive_alarms += 1
                break
    assert naive_alarms / trials > 2 * naive.alpha


def test_a_five_percent_slowdown_is_found_through_drift_that_history_could_not_see_past() -> None:
    """Rounds share a 10% drift (a night's level) but the paired ratio's spread is 3%: a 5% slowdown
    is called slower in nearly every stream, within tens of rounds; an A/A pair is never slower."""
    rng = random.Random(11)
    results = [_sequential(_stream(rng, 0.05, 0.03), POLICY, 200) for _ in range(100)]
    slower = [n for verdict, n in results if verdict == "slower"]
    assert len(slower) >= 95
    assert sorted(slower)[len(slower) // 2] <= 40
    default = PairedPolicy()  # alpha 0.01: at most 0.5% of A/A pairs called slower
    aa = [_sequential(_stream(rng, 0.0, 0.03), default, 200)[0] for _ in range(100)]
    assert aa.count("slower") + aa.count("faster") <= 1
    assert aa.count("same") >= 95


def test_verdict_rules() -> None:
    bound = math.log1p(0.03)
    assert classify(0.0, -0.01, 0.01, 0.03) == "same"
    assert classify(0.1, 0.05, 0.15, 0.03) == "slower"
    assert classify(-0.1, -0.15, -0.05, 0.03) == "faster"
    # certainly slower, but by less than the minimum effect so far: keep measuring
    assert classify(bound * 0.8, 0.001, bound * 1.6, 0.03) == "inconclusive"
    assert classify(0.0, -0.05, 0.05, 0.03) == "inconclusive"


def test_judge_reports_ratio_interval_and_geometric_means() -> None:
    pairs = [(2.0, 2.2), (4.0, 4.4), (3.0, 3.3), (2.5, 2.75), (5.0, 5.5)]
    verdict = judge(pairs, POLICY)
    assert verdict.ratio == pytest.approx(1.1)
    assert verdict.ci_low <= verdict.ratio <= verdict.ci_high
    assert verdict.baseline_p50_ms == pytest.approx(math.exp(sum(math.log(a) for a, _ in pairs) / 5))
    assert verdict.verdict == "slower"  # identical ratios: the standard error's floor, not zero
    assert judge(pairs[:4], POLICY).verdict == "inconclusive"  # before the first look
    document = verdict.to_dict()
    assert set(document) >= {"verdict", "ratio", "interval", "p_value", "rounds", "method"}


def test_spending_sums_to_alpha() -> None:
    policy = PairedPolicy(alpha=0.01, min_effect=0.03, min_rounds=3)
    assert sum(policy.look_alpha(n) for n in range(1, 200_000)) == pytest.approx(0.01, rel=1e-4)
    assert policy.for_family(10).alpha == pytest.approx(0.001)


def _steady(rounds: int, mean: float, spread: float) -> list[tuple[float, float]]:
    """Rounds whose log ratios alternate mean +/- spread: the same ratio and spread at any length."""
    return [(5.0, 5.0 * math.exp(mean + spread * (-1) ** i)) for i in range(rounds)]


def test_rounds_to_decide_projects_beyond_the_rounds_run() -> None:
    verdict = judge(_steady(8, 0.06, 0.08), POLICY)
    assert verdict.verdict == "inconclusive"
    needed = rounds_to_decide(verdict, POLICY)
    assert needed is not None and needed > 8
    # measured at that length with the same ratio and spread, the rounds do decide (an even count
    # keeps the alternating pattern's mean exact)
    even = needed + needed % 2
    assert judge(_steady(even, 0.06, 0.08), POLICY).verdict == "slower"
    assert judge(_steady(even - 6, 0.06, 0.08), POLICY).verdict == "inconclusive"
    hopeless = judge([(1.0, 1.029 * math.exp(0.5 * (-1) ** i)) for i in range(10)], POLICY)
    assert rounds_to_decide(hopeless, POLICY) is None  # just inside the bound, a 50% spread
