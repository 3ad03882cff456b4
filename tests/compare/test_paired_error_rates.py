"""The compare's error rates, measured so that a wrong statistic fails: Monte Carlo trials of the
sequential verdict (farm/ondevice_farm/analysis/paired.py) on synthetic rounds with a known truth
(tests/compare/paired_montecarlo.py), at the shipped defaults (alpha 0.01, looks from round 5,
`--max-rounds` 200).

Each A/A test asserts two bounds on its count of false `slower`/`faster` verdicts:
- the documented guarantee: count <= the 99.9% quantile of Binomial(trials, alpha);
- the procedure's own rate: count <= the 99.9% quantile of Binomial(trials, r), r the one-sided
  99.9% Clopper-Pearson upper limit of the rate measured once on a million trials of the same
  scenario (REFERENCE; `python -m tests.compare.paired_montecarlo` measures it again).
The union bound behind the guarantee is loose (the looks' errors overlap): on normal rounds the
procedure's rate is 0.0044, not 0.01, so a one-sided quantile or alpha spent twice (0.0077) stays
under alpha and only the second bound sees it. A deliberate change of the procedure that moves its
rate must measure the references again; the first bound holds whatever it measures.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from ondevice_farm.analysis.paired import DEFAULT_MIN_ROUNDS, PairedPolicy, judge
from ondevice_farm.controller.compare import DEFAULT_MAX_ROUNDS

from . import paired_montecarlo as mc
from .test_student_t import quantile, upper_tail

ALPHA = PairedPolicy().alpha
#: false alarms of the product in 1,000,000 trials of each scenario (seeds 1001-1003, 2026-12-06)
REFERENCE = {"normal": 4425, "t3": 2140, "drift": 4315}
REFERENCE_TRIALS = 1_000_000
#: power scenario, 100,000 trials (seed 1004): not called slower within the rounds; called slower by
#: round 60 (paired_montecarlo.POWER_EARLY_ROUNDS)
REFERENCE_POWER_MISSES = 2098
REFERENCE_POWER_EARLY = 28681
REFERENCE_POWER_TRIALS = 100_000


def test_the_simulation_runs_the_shipped_defaults() -> None:
    """The references were measured at these; a changed default must measure them again."""
    policy = PairedPolicy()
    assert (policy.alpha, policy.min_rounds, policy.min_effect, DEFAULT_MAX_ROUNDS) == (0.01, 5, 0.03, 200)


def test_every_look_is_the_documented_interval() -> None:
    """The half-width of `judge`'s interval after round n, in standard errors, is t_{1 - a_n/2, n-1}
    with a_n = alpha * 5 / (n (n + 1)) (docs/compare.md), the quantile from the closed-form t, and
    there is no look before round 5. At round 5 it is 7.529; a one-sided quantile (or alpha spent
    twice) makes it 6.254, no spending 4.604, n degrees of freedom 6.138."""
    q = mc.look_quantiles()
    assert np.all(np.isinf(q[:DEFAULT_MIN_ROUNDS]))
    for n in range(DEFAULT_MIN_ROUNDS, DEFAULT_MAX_ROUNDS + 1):
        spend = ALPHA * DEFAULT_MIN_ROUNDS / (n * (n + 1))
        assert q[n] == pytest.approx(quantile(1.0 - spend / 2.0, n - 1), rel=1e-6), n


def _anytime_p(d: list[float]) -> float:
    """min over the looks k >= 5 of p_k * k (k + 1) / 5, p_k the two-sided t test's p at look k."""
    best = 1.0
    for k in range(DEFAULT_MIN_ROUNDS, len(d) + 1):
        mean = sum(d[:k]) / k
        sd = math.sqrt(sum((v - mean) ** 2 for v in d[:k]) / (k - 1))
        p = 2.0 * upper_tail(abs(mean) / (sd / math.sqrt(k)), k - 1)
        best = min(best, p * k * (k + 1) / DEFAULT_MIN_ROUNDS)
    return best


@pytest.mark.parametrize("effect", [0.0, 0.01, 0.03, 0.1])
def test_p_value_is_the_documented_anytime_p_value(effect: float) -> None:
    """`p_value` is min over the looks of p_n * n (n + 1) / n0 (docs/compare.md), p_n from the
    closed-form t; it is at most alpha exactly when some look's interval so far has left 1."""
    rng = random.Random(int(effect * 100))
    d = [math.log1p(effect) + rng.gauss(0.0, 0.05) for _ in range(40)]
    pairs = [(1.0, math.exp(v)) for v in d]
    expected = min(_anytime_p(d), 1.0)
    verdict = judge(pairs, PairedPolicy(min_effect=0.0))
    assert verdict.p_value == pytest.approx(expected, rel=1e-6)
    left = any(judge(pairs[:k], PairedPolicy(min_effect=0.0)).verdict != "inconclusive" for k in range(5, 41))
    assert (verdict.p_value <= ALPHA) == left
    if effect == 0.1:
        assert left  # the sequence used does leave 1, so both sides of the equivalence are seen


def _false_alarms(name: str, quantiles: dict[str, mc.Array]) -> tuple[mc.Outcome, int, int]:
    draw, seed, trials = mc.SCENARIOS[name]
    outcome = mc.simulate(draw, trials, seed, quantiles)
    claim = mc.binom_upper(trials, ALPHA)
    tight = mc.binom_upper(trials, mc.rate_upper(REFERENCE[name], REFERENCE_TRIALS))
    return outcome, claim, tight


@pytest.mark.parametrize("name", list(mc.SCENARIOS))
def test_an_a_a_pair_is_called_slower_or_faster_at_most_alpha_of_the_time(name: str) -> None:
    """A/A pairs, the gate off (min_effect 0: only a false `slower` or `faster` can stop one), looked at
    after every round up to 200. Trials and bounds (module docstring), own rate from the reference:
    - normal rounds: 40,000 trials, claim <= 463, own rate <= 229 (reference 0.0044); measured 154;
    - Student t, 3 df: 60,000 trials, claim <= 677, own rate <= 175 (reference 0.0021); measured 123;
    - a drift both arms share: 40,000 trials, claim <= 463, own rate <= 224 (reference 0.0043);
      measured 170.
    Under a one-sided quantile or alpha spent twice: 309, 263, 329; with no spending: 4,661, 5,508,
    4,710; with n degrees of freedom: 256, 226, 278 (tests/compare/paired_montecarlo.py prints them)."""
    outcome, claim, tight = _false_alarms(name, {"product": mc.look_quantiles()})
    alarms = outcome.alarms()
    assert alarms <= claim, (name, alarms, claim)
    assert alarms <= tight, (name, alarms, tight, "a changed error rate: see the module docstring")
    # both directions are errors the interval makes, each half of them: a binomial split
    assert min(outcome.slower["product"], outcome.faster["product"]) >= mc.binom_lower(alarms, 0.5)
    mc.confirm(outcome, mc.GATE_OFF, mc.look_quantiles())


def test_the_bound_catches_a_one_sided_quantile() -> None:
    """The test above with the product's quantile taken at 1 - spend instead of 1 - spend / 2 (alpha
    spent twice is the same error): 309 false alarms of 40,000 normal trials, over the own-rate bound
    (229) though under alpha's (463)."""
    with mc.injected("one-sided"):
        one_sided = mc.read_quantiles(mc.GATE_OFF)
    outcome, claim, tight = _false_alarms("normal", {"one-sided": one_sided})
    assert tight < outcome.alarms("one-sided") <= claim


def test_power_at_the_defaults() -> None:
    """B 5% slower with a 10% spread of the rounds' log ratios (a loaded unit), the shipped defaults
    (alpha 0.01, min_effect 3%, 200 rounds), 4,000 trials against the reference's 100,000:
    - within 200 rounds the reference calls 97.9% slower (2,098 misses); misses <= the 99.9% binomial
      quantile at that rate's 99.9% upper limit (<= 120);
    - by round 60 it has called 28.7% slower (28,681): the count lies inside the 99.9% quantiles at
      that rate's 99.9% limits on each side (1,042 to 1,254): a liberal error decides sooner;
    - a B called faster or the same is an error of the interval: at most alpha / 2 (<= 35).
    Measured: 70 misses, 1,142 by round 60, 1 faster, 0 same. Under the injected errors (by round 60):
    one-sided quantile or alpha spent twice 1,413, no spending 3,661, n degrees of freedom 1,179
    (within: df moves only the first looks), a tenth of each look's share 486 and 255 misses."""
    trials = mc.POWER_TRIALS
    policy = PairedPolicy()
    # the interval does not depend on min_effect: the gate-off quantiles are the defaults'
    quantiles = {"product": mc.look_quantiles()}
    outcome = mc.simulate(mc.power_draw, trials, 4, quantiles, min_effect=policy.min_effect)
    misses = trials - outcome.slower["product"]
    assert misses <= mc.binom_upper(trials, mc.rate_upper(REFERENCE_POWER_MISSES, REFERENCE_POWER_TRIALS))
    early = mc.early_slower(outcome)
    low = mc.binom_lower(trials, mc.rate_lower(REFERENCE_POWER_EARLY, REFERENCE_POWER_TRIALS))
    high = mc.binom_upper(trials, mc.rate_upper(REFERENCE_POWER_EARLY, REFERENCE_POWER_TRIALS))
    assert low <= early <= high, (low, early, high)
    assert outcome.faster["product"] + outcome.same["product"] <= mc.binom_upper(trials, ALPHA / 2)
    mc.confirm(outcome, policy, quantiles["product"])
