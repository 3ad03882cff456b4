"""Is B slower than A? The paired, sequential verdict of interleaved rounds on one unit.

The unit of analysis is the round: d = log(p50 of B's session / p50 of A's session), both
sessions measured back to back on the same unit in a random order (agents/ondevice_farm_agents/paired.py).
Drift the two sessions share cancels in d, so the rounds' d are close to independent draws around the log
of the true ratio; the headline ratio is exp(mean d), the geometric mean of the rounds' ratios.

The test: Student's paired t on the log ratios (the sessions' p50s are roughly log-normal, and a
ratio is what a user asks about; Student 1908, as in Kalibera & Jones, ISMM 2013, for ratios of
means on the log scale). The rounds are looked at after every round, so the interval at round n
is built at level alpha_n with alpha_n = alpha * n0 / (n (n + 1)) for n >= n0 (`min_rounds`):
the alpha_n sum to alpha, so by the union bound the intervals of all looks hold together with
probability >= 1 - alpha whatever rule stops the rounds (a Bonferroni alpha-spending over an
unbounded number of looks: a confidence sequence, Darling & Robbins 1967, built from fixed-n t
intervals). Several (device, target) pairs in one compare are a family: each pair spends
alpha / m (Bonferroni), which holds under any dependence and at each pair's own stopping time.

The verdict of an interval [lo, hi] of the ratio, `min_effect` = e:
- same:    lo >= 1 / (1 + e) and hi <= 1 + e (an equivalence test at the interval's level);
- slower:  lo > 1 and the ratio >= 1 + e (a slowdown both certain and as large as asked about);
- faster:  hi < 1 and the ratio <= 1 / (1 + e);
- inconclusive otherwise: the rounds go on until one of the above or the budget ends.
An A/A pair is called `slower` only if its interval ever leaves 1 upwards: at most alpha / 2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ondevice_farm.analysis.student_t import t_quantile, t_sf

DEFAULT_ALPHA = 0.01
DEFAULT_MIN_EFFECT = 0.03
#: looks before this many rounds are not made (alpha_n is spent from here on): a t interval on
#: two or three rounds leans on a spread estimated from almost nothing
DEFAULT_MIN_ROUNDS = 5
#: a standard error of the mean log ratio is never taken below this (0.01%): identical figures
#: (a deterministic simulated unit) still give an interval, not a division by zero
MIN_STANDARD_ERROR = 1e-4
#: how far ahead `rounds_to_decide` looks
MAX_PROJECTED_ROUNDS = 100_000
METHOD = (
    "paired t on log(B p50 / A p50) per round, Bonferroni alpha-spending over looks "
    "(alpha_n = alpha*n0/(n(n+1))) and over the compare's pairs"
)
VERDICTS = ("slower", "faster", "same", "inconclusive")


@dataclass(frozen=True)
class PairedPolicy:
    """`alpha`: the error of one pair's verdict (already divided over the family, see `for_family`)."""

    alpha: float = DEFAULT_ALPHA
    min_effect: float = DEFAULT_MIN_EFFECT
    min_rounds: int = DEFAULT_MIN_ROUNDS

    def for_family(self, pairs: int) -> PairedPolicy:
        return PairedPolicy(self.alpha / max(pairs, 1), self.min_effect, self.min_rounds)

    def look_alpha(self, n: int) -> float:
        """The share of alpha spent at the look after round n (0 before `min_rounds`)."""
        n0 = max(self.min_rounds, 2)
        return 0.0 if n < n0 else self.alpha * n0 / (n * (n + 1))


@dataclass(frozen=True)
class PairedVerdict:
    verdict: str
    #: geometric mean of B/A over the rounds
    ratio: float
    ci_low: float
    ci_high: float
    #: anytime-valid two-sided p-value of "no difference" (min over the looks of p_n / spend_n)
    p_value: float
    rounds: int
    #: geometric means of the rounds' session p50s (ms)
    baseline_p50_ms: float
    candidate_p50_ms: float
    #: standard deviation of the rounds' log ratios
    sd_log_ratio: float
    alpha: float
    min_effect: float
    #: the interval's level at the last look
    level: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "ratio": self.ratio,
            "interval": [self.ci_low, self.ci_high],
            "level": self.level,
            "p_value": self.p_value,
            "rounds": self.rounds,
            "baseline_p50_ms": self.baseline_p50_ms,
            "candidate_p50_ms": self.candidate_p50_ms,
            "sd_log_ratio": self.sd_log_ratio,
            "alpha": self.alpha,
            "min_effect": self.min_effect,
            "method": METHOD,
        }


def stored_pairs(rounds: Sequence[dict[str, Any]]) -> list[tuple[float, float]]:
    """(A p50, B p50) per round from a job document's `paired.rounds`."""
    return [(float(r["baseline_p50_ms"]), float(r["candidate_p50_ms"])) for r in rounds]


def log_ratios(pairs: Sequence[tuple[float, float]]) -> list[float]:
    """log(B/A) per round from (A p50, B p50) pairs."""
    return [math.log(b / a) for a, b in pairs]


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mean, sd


def _interval(mean: float, sd: float, n: int, spend: float) -> tuple[float, float]:
    """The log-scale interval at one look whose two-sided error is `spend`."""
    if spend <= 0.0 or n < 2:
        return -math.inf, math.inf
    half = t_quantile(1.0 - spend / 2.0, n - 1) * max(sd / math.sqrt(n), MIN_STANDARD_ERROR)
    return mean - half, mean + half


def classify(mean: float, lo: float, hi: float, min_effect: float) -> str:
    """The verdict of a log-scale interval [lo, hi] around `mean` (module docstring)."""
    bound = math.log1p(min_effect)
    if lo >= -bound and hi <= bound:
        return "same"
    if lo > 0.0 and mean >= bound:
        return "slower"
    if hi < 0.0 and mean <= -bound:
        return "faster"
    return "inconclusive"


def _p_two_sided(mean: float, sd: float, n: int) -> float:
    se = max(sd / math.sqrt(n), MIN_STANDARD_ERROR)
    return min(1.0, 2.0 * t_sf(abs(mean) / se, n - 1))


def judge(pairs: Sequence[tuple[float, float]], policy: PairedPolicy) -> PairedVerdict:
    """The verdict after the rounds so far (`pairs`: (A p50, B p50) per round, in round order)."""
    if not pairs:
        raise ValueError("a paired verdict needs at least one round")
    d = log_ratios(pairs)
    n = len(d)
    mean, sd = _mean_sd(d)
    spend = policy.look_alpha(n)
    lo, hi = _interval(mean, sd, n, spend)
    p_value = 1.0
    total = total_sq = 0.0
    for k, value in enumerate(d, start=1):  # every look's p-value, from running sums
        total += value
        total_sq += value * value
        if k < max(policy.min_rounds, 2):
            continue
        k_mean = total / k
        k_sd = math.sqrt(max(total_sq - k * k_mean * k_mean, 0.0) / (k - 1))
        weight = policy.look_alpha(k) / policy.alpha
        p_value = min(p_value, _p_two_sided(k_mean, k_sd, k) / weight)
    return PairedVerdict(
        verdict=classify(mean, lo, hi, policy.min_effect) if spend > 0 else "inconclusive",
        ratio=math.exp(mean),
        ci_low=math.exp(lo),
        ci_high=math.exp(hi),
        p_value=min(p_value, 1.0),
        rounds=n,
        baseline_p50_ms=math.exp(sum(math.log(a) for a, _ in pairs) / n),
        candidate_p50_ms=math.exp(sum(math.log(b) for _, b in pairs) / n),
        sd_log_ratio=sd,
        alpha=policy.alpha,
        min_effect=policy.min_effect,
        level=1.0 - spend,
    )


def decided(pairs: list[tuple[float, float]], policy: PairedPolicy) -> bool:
    """The stopping rule a unit asks after every round (`PairedPlan.decided`, via functools.partial)."""
    return judge(pairs, policy).verdict != "inconclusive"


def rounds_to_decide(verdict: PairedVerdict, policy: PairedPolicy) -> int | None:
    """At the rounds' current ratio and spread, the total rounds after which the interval would
    be narrow enough to decide (None: not within `MAX_PROJECTED_ROUNDS`: a ratio just inside the
    `min_effect` bound with a wide spread). A projection for the user, not a promise."""
    mean, sd = math.log(verdict.ratio), verdict.sd_log_ratio
    n = max(verdict.rounds + 1, policy.min_rounds)
    while n <= MAX_PROJECTED_ROUNDS:
        lo, hi = _interval(mean, sd, n, policy.look_alpha(n))
        if classify(mean, lo, hi, policy.min_effect) != "inconclusive":
            return n
        n = n + 1 if n < 100 else int(n * 1.05)
    return None
