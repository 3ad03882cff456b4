"""A Monte Carlo of the compare's sequential verdict (farm/ondevice_farm/analysis/paired.py), vectorized.

A trial is one pair's rounds: per-round log ratios d with a known truth, looked at after every round
from `min_rounds` to the shipped `--max-rounds`, as a unit runs them (agents/ondevice_farm_agents/paired.py).
The look after round n has the interval mean_n +/- q_n * max(sd_n / sqrt(n), MIN_STANDARD_ERROR), and
q_n carries everything an error rate rests on: the share of alpha spent at the look, the quantile and
its degrees of freedom. `look_quantiles` reads q_n from `judge` itself (on n rounds of mean 0 and
standard deviation 1), so a wrong quantile, spending or df in the product moves q_n and the rates
simulated here with it; numpy then does the looks of many trials at once, and `judge` confirms the
verdict of sampled trials at their deciding look.

`python -m tests.compare.paired_montecarlo` measures the reference rates that
tests/compare/test_paired_error_rates.py asserts (a million trials each, about five minutes) and the
table of injected errors (`injected`): each test's count under a one-sided quantile, alpha spent
twice, no spending, n degrees of freedom instead of n - 1, and a tenth of alpha spent.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from unittest import mock

import numpy as np
import numpy.typing as npt

from ondevice_farm.analysis import paired, student_t
from ondevice_farm.analysis.paired import MIN_STANDARD_ERROR, PairedPolicy, judge
from ondevice_farm.controller.compare import DEFAULT_MAX_ROUNDS

Array = npt.NDArray[np.float64]
Draw = Callable[[np.random.Generator, int, int], Array]

#: the spread of a round's log ratio in the simulations (3%, this host's quiet figure); the t
#: statistic does not depend on it, only the standard error's floor would, far below it
ROUND_SD = 0.03
CHUNK = 2_000
#: the error-rate tests: the compare's defaults with the minimum-effect gate off, so that only a
#: false `slower` or `faster` can end an A/A pair and the spending alone holds the error
GATE_OFF = PairedPolicy(min_effect=0.0)


# ---- binomial bounds: exact sums of the binomial's terms ----


def binom_pmf(n: int, p: float, k_max: int) -> Array:
    """P(X = k) for k = 0..k_max, X ~ Binomial(n, p), each term's log by the ratio of consecutive
    terms: log C(n, k) = sum over j <= k of log((n - j + 1) / j)."""
    j = np.arange(1, min(k_max, n) + 1, dtype=np.float64)
    steps = np.log((n - j + 1.0) / j) + math.log(p) - math.log1p(-p)
    terms: Array = np.exp(n * math.log1p(-p) + np.concatenate(([0.0], np.cumsum(steps))))
    return terms


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    return 0.0 if k < 0 else min(1.0, float(np.sum(binom_pmf(n, p, k))))


def binom_upper(n: int, p: float, level: float = 0.999) -> int:
    """The `level` quantile of Binomial(n, p): the least k with P(X <= k) >= level. A count above it
    has probability under 1 - level when the rate is p (or less)."""
    return min(int(np.searchsorted(np.cumsum(binom_pmf(n, p, n)), level)), n)


def binom_lower(n: int, p: float, level: float = 0.999) -> int:
    """The greatest k with P(X < k) <= 1 - level: a count below it has probability under 1 - level
    when the rate is p (or more)."""
    return int(np.searchsorted(np.cumsum(binom_pmf(n, p, n)), 1.0 - level, side="right"))


def rate_upper(count: int, trials: int, level: float = 0.999) -> float:
    """One-sided Clopper-Pearson upper limit of a rate seen `count` times in `trials` (bisection)."""
    low, high = count / trials, 1.0
    for _ in range(60):
        mid = (low + high) / 2.0
        low, high = (mid, high) if binom_cdf(count, trials, mid) > 1.0 - level else (low, mid)
    return high


def rate_lower(count: int, trials: int, level: float = 0.999) -> float:
    """One-sided Clopper-Pearson lower limit of a rate seen `count` times in `trials` (bisection)."""
    low, high = 0.0, count / trials
    for _ in range(60):
        mid = (low + high) / 2.0
        low, high = (low, mid) if 1.0 - binom_cdf(count - 1, trials, mid) > 1.0 - level else (mid, high)
    return low


# ---- the product's interval, look by look ----


def unit_rounds(n: int) -> list[tuple[float, float]]:
    """n rounds (A, B) whose log ratios have mean 0 and standard deviation 1 exactly (up to rounding):
    +c, -c, ... (and a 0 when n is odd), so every earlier look's mean is near 0 as well, where the
    p-values `judge` computes for them cost least."""
    values = [(-1.0) ** i for i in range(n - n % 2)] + [0.0] * (n % 2)
    sd = math.sqrt(sum(v * v for v in values) / (n - 1))
    return [(1.0, math.exp(v / sd)) for v in values]


def read_quantiles(policy: PairedPolicy, max_rounds: int = DEFAULT_MAX_ROUNDS) -> Array:
    """q[n] for n = 0..max_rounds: the half-width of `judge`'s interval at the look after round n in
    standard errors (inf where no look is made)."""
    q = np.full(max_rounds + 1, np.inf)
    for n in range(2, max_rounds + 1):
        verdict = judge(unit_rounds(n), policy)
        if math.isfinite(verdict.ci_high):
            se = max(verdict.sd_log_ratio / math.sqrt(n), MIN_STANDARD_ERROR)
            q[n] = (math.log(verdict.ci_high) - math.log(verdict.ratio)) / se
    return q


@functools.cache
def look_quantiles(policy: PairedPolicy = GATE_OFF, max_rounds: int = DEFAULT_MAX_ROUNDS) -> Array:
    """`read_quantiles` of the product as it is, read once per process."""
    return read_quantiles(policy, max_rounds)


# ---- synthetic rounds with a known truth ----


def normal_rounds(rng: np.random.Generator, trials: int, rounds: int) -> Array:
    return ROUND_SD * rng.standard_normal((trials, rounds))


def t3_rounds(rng: np.random.Generator, trials: int, rounds: int) -> Array:
    """Student t with 3 degrees of freedom (variance 3), scaled to ROUND_SD: a tail that puts one round
    in 230 beyond 4.5 standard deviations, where a normal puts one in 150,000."""
    return ROUND_SD / math.sqrt(3.0) * rng.standard_t(3, (trials, rounds))


def drift_rounds(rng: np.random.Generator, trials: int, rounds: int) -> Array:
    """A level both arms share that moves while the rounds run: a warm-up ramp (+35% in all, time constant
    100 rounds: a phone throttling), a thermal cycle (+/-10% every 20 rounds, random phase) and a random walk
    (1% a session). Round i runs its two sessions at times 2i and 2i + 1 in an order drawn per round,
    as the unit does, so d = own noise + (the level's step between the two sessions) * (+1 if A ran
    first, else -1): the drift does not cancel within a round, it becomes symmetric noise whose size
    moves with the cycle and the ramp. Each session has 2% noise of its own. The step is taken in
    closed form: the ramp's and the cycle's over one session, and one step of the walk (which, with
    the sessions' own noise, is normal: 3% together)."""
    i = np.arange(rounds, dtype=np.float64)
    ramp = 0.3 * np.exp(-2.0 * i / 200.0) * -math.expm1(-1.0 / 200.0)
    # sin(w (t + 1) + f) - sin(w t + f) = 2 sin(w / 2) cos(w (t + 1/2) + f), t = 2i
    angle = 2.0 * math.pi * (2.0 * i + 0.5) / 40.0
    phase = rng.uniform(0.0, 2.0 * math.pi, (trials, 1))
    cycle = 0.2 * math.sin(math.pi / 40.0) * (np.cos(angle) * np.cos(phase) - np.sin(angle) * np.sin(phase))
    step = ramp + cycle
    a_first = rng.random((trials, rounds)) < 0.5
    noise = math.sqrt(0.01**2 + 2 * 0.02**2) * rng.standard_normal((trials, rounds))
    rounds_d: Array = np.where(a_first, step, -step) + noise
    return rounds_d


# ---- the sequential looks ----


def look_statistics(d: Array) -> tuple[Array, Array]:
    """Per trial and look n = 1..rounds (column n - 1): the running mean of d and its standard error
    (sample sd / sqrt(n), floored as the product floors it)."""
    n = np.arange(1, d.shape[1] + 1, dtype=np.float64)
    total = np.cumsum(d, axis=1)
    se = np.cumsum(d * d, axis=1)
    mean = total / n
    se -= total * mean  # the sum of squares about the mean
    np.maximum(se, 0.0, out=se)
    se /= np.maximum(n - 1.0, 1.0) * n
    np.sqrt(se, out=se)
    np.maximum(se, MIN_STANDARD_ERROR, out=se)
    return mean, se


def first_decision(
    mean: Array, se: Array, q: Array, min_effect: float
) -> tuple[npt.NDArray[np.int64], Array]:
    """Per trial: the first look whose verdict (paired.classify's rules) is not inconclusive, as a
    round count (0: none within the rounds), and the sign of that verdict (+1 slower, -1 faster, 0
    same or none)."""
    half = q[1 : mean.shape[1] + 1] * se
    lo, hi = mean - half, mean + half
    bound = math.log1p(min_effect)
    same = (lo >= -bound) & (hi <= bound)
    slower = (lo > 0.0) & (mean >= bound)
    faster = (hi < 0.0) & (mean <= -bound)
    decided = same | slower | faster
    index = np.argmax(decided, axis=1)
    any_decided = decided[np.arange(len(index)), index]
    rows = np.arange(len(index))
    sign = np.where(slower[rows, index], 1.0, np.where(faster[rows, index], -1.0, 0.0))
    return np.where(any_decided, index + 1, 0), np.where(any_decided, sign, 0.0)


@dataclass
class Outcome:
    trials: int
    #: per quantile set: trials decided slower / faster / same (at their first decision)
    slower: dict[str, int] = field(default_factory=dict)
    faster: dict[str, int] = field(default_factory=dict)
    same: dict[str, int] = field(default_factory=dict)
    #: per quantile set: the rounds at which trials were decided slower
    stops: dict[str, list[int]] = field(default_factory=dict)
    #: (rounds' log ratios, first decision's round count or 0, its sign) of sampled trials, for `confirm`
    samples: list[tuple[Array, int, float]] = field(default_factory=list)

    def alarms(self, key: str = "product") -> int:
        return self.slower[key] + self.faster[key]


def simulate(
    draw: Draw,
    trials: int,
    seed: int,
    quantiles: dict[str, Array],
    min_effect: float = 0.0,
    rounds: int = DEFAULT_MAX_ROUNDS,
    keep: int = 6,
) -> Outcome:
    """`trials` pairs of `rounds` rounds each, looked at after every round and stopped at the first
    decision; counted for each set of look quantiles (the product's, or an injected error's)."""
    rng = np.random.default_rng(seed)
    outcome = Outcome(trials)
    for key in quantiles:
        outcome.slower[key] = outcome.faster[key] = outcome.same[key] = 0
        outcome.stops[key] = []
    done = 0
    while done < trials:
        size = min(CHUNK, trials - done)
        d = draw(rng, size, rounds)
        mean, se = look_statistics(d)
        for key, q in quantiles.items():
            stop, sign = first_decision(mean, se, q, min_effect)
            outcome.slower[key] += int(np.sum(sign > 0))
            outcome.faster[key] += int(np.sum(sign < 0))
            outcome.same[key] += int(np.sum((stop > 0) & (sign == 0)))
            outcome.stops[key].extend(stop[sign > 0].tolist())
            if key == "product" and len(outcome.samples) < keep:
                # half decided trials, half undecided, from the first chunk (or the next)
                for want in (True, False):
                    rows = np.flatnonzero((stop > 0) == want)[: keep // 2]
                    outcome.samples.extend((d[r], int(stop[r]), float(sign[r])) for r in rows)
        done += size
    return outcome


def confirm(outcome: Outcome, policy: PairedPolicy, q: Array) -> None:
    """`judge` on sampled trials' own rounds agrees with the vectorized looks: a decided trial is
    inconclusive one round before its decision and decided the same way at it; an undecided one is
    inconclusive at the look that came nearest to deciding (the greatest |mean| / half-width)."""
    name = {1.0: "slower", -1.0: "faster"}
    for d, stop, sign in outcome.samples:
        pairs = [(1.0, math.exp(v)) for v in d.tolist()]
        if stop:
            verdict = judge(pairs[:stop], policy).verdict
            assert verdict == name.get(sign, "same"), (stop, verdict, sign)
            if stop > policy.min_rounds:
                assert judge(pairs[: stop - 1], policy).verdict == "inconclusive", stop
        else:
            mean, se = look_statistics(d[None, :])
            nearest = int(np.argmax(np.abs(mean[0]) / (q[1 : len(d) + 1] * se[0]))) + 1
            assert judge(pairs[:nearest], policy).verdict == "inconclusive", nearest


# ---- injected errors ----


@contextlib.contextmanager
def injected(error: str) -> Iterator[None]:
    """The product with one error put in: `one-sided` (the quantile at 1 - spend, not 1 - spend / 2),
    `twice` (each look spends twice its share), `unspent` (every look at the full alpha), `df`
    (n degrees of freedom, not n - 1); and one that errs the other way, `tenth` (each look spends a
    tenth of its share), which the power test is there to catch."""
    quantile, look_alpha = student_t.t_quantile, PairedPolicy.look_alpha
    n0 = paired.DEFAULT_MIN_ROUNDS
    patches: dict[str, Callable[..., float]] = {
        "one-sided": lambda p, df: quantile(1.0 - 2.0 * (1.0 - p), df),
        "df": lambda p, df: quantile(p, df + 1),
        "twice": lambda self, n: 2.0 * look_alpha(self, n),
        "unspent": lambda self, n: self.alpha if n >= max(self.min_rounds, n0) else 0.0,
        "tenth": lambda self, n: 0.1 * look_alpha(self, n),
    }
    patch = (
        mock.patch.object(paired, "t_quantile", patches[error])
        if error in ("one-sided", "df")
        else mock.patch.object(PairedPolicy, "look_alpha", patches[error])
    )
    with patch:
        yield


INJECTED = ("one-sided", "twice", "unspent", "df")


def injected_quantiles(
    policy: PairedPolicy = GATE_OFF, errors: tuple[str, ...] = INJECTED
) -> dict[str, Array]:
    quantiles = {"product": look_quantiles(policy)}
    for error in errors:
        with injected(error):
            quantiles[error] = read_quantiles(policy)
    return quantiles


#: the error-rate scenarios of test_paired_error_rates.py: (draw, seed, trials)
SCENARIOS: dict[str, tuple[Draw, int, int]] = {
    "normal": (normal_rounds, 1, 40_000),
    "t3": (t3_rounds, 2, 60_000),
    "drift": (drift_rounds, 3, 40_000),
}
#: the power scenario: B 5% slower, a 10% spread of the rounds' log ratios (a loaded unit), at the
#: shipped minimum effect (3%)
POWER_EFFECT = 0.05
POWER_SD = 0.10
POWER_TRIALS = 4_000
#: the power test also counts the pairs decided `slower` by this round: the power curve early on,
#: which a liberal error raises and a conservative one lowers
POWER_EARLY_ROUNDS = 60


def early_slower(outcome: Outcome, key: str = "product") -> int:
    """Trials decided slower by round POWER_EARLY_ROUNDS."""
    return sum(1 for n in outcome.stops[key] if n <= POWER_EARLY_ROUNDS)


def power_draw(rng: np.random.Generator, trials: int, rounds: int) -> Array:
    return POWER_SD / ROUND_SD * normal_rounds(rng, trials, rounds) + math.log1p(POWER_EFFECT)


def main(argv: list[str]) -> None:
    """`[REFERENCE_TRIALS] [SCENARIO...]`: the reference rates and, for each scenario as the tests run
    it, the count under the product and under each injected error."""
    reference = int(argv[0]) if argv else 1_000_000
    names = argv[1:] or [*SCENARIOS, "power"]
    quantiles = injected_quantiles(errors=(*INJECTED, "tenth"))
    print(f"look quantiles: q5 {quantiles['product'][5]:.4f}, q200 {quantiles['product'][200]:.4f}")
    for name in (n for n in names if n in SCENARIOS):
        draw, seed, trials = SCENARIOS[name]
        ref = simulate(draw, reference, 1000 + seed, {"product": quantiles["product"]})
        print(f"{name}: reference {ref.alarms()} alarms of {reference} trials (seed {1000 + seed})")
        test = simulate(draw, trials, seed, quantiles)
        row = ", ".join(f"{k} {test.alarms(k)} ({test.alarms(k) / trials:.5f})" for k in quantiles)
        print(f"  as tested ({trials} trials, seed {seed}): {row}")
    if "power" in names:
        # the interval does not depend on min_effect: the gate-off quantiles serve the defaults
        ref = simulate(power_draw, reference // 10, 1004, {"product": quantiles["product"]}, 0.03)
        misses = ref.trials - ref.slower["product"]
        early = early_slower(ref)
        print(
            f"power: reference {misses} misses, {early} slower by round {POWER_EARLY_ROUNDS}, "
            f"of {ref.trials} trials (seed 1004)"
        )
        test = simulate(power_draw, POWER_TRIALS, 4, quantiles, 0.03)
        row = ", ".join(
            f"{k} misses {test.trials - test.slower[k]} (faster {test.faster[k]}, same {test.same[k]}, "
            f"by round {POWER_EARLY_ROUNDS} {early_slower(test, k)}, median {np.median(test.stops[k]):.0f})"
            for k in quantiles
        )
        print(f"  as tested ({POWER_TRIALS} trials, seed 4): {row}")


if __name__ == "__main__":
    main(sys.argv[1:])
