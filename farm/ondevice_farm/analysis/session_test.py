"""Is a job slower than its baseline? A test whose unit is the measurement session.

Latency depends on state fixed for a whole session (thread placement, allocator layout, clocks,
thermal state), so the samples of one session are not independent draws and a test on them
(farm/ondevice_farm/analysis/regression.py's Mann-Whitney, kept as a diagnostic) sees a session-to-session
difference as a certain regression. Following Kalibera & Jones, "Rigorous benchmarking in
reasonable time" (ISMM 2013), the variation is split by level and the comparison is made at the
level that varies: the session.

On the log scale (ratios become differences), with y[r][k] the log p50 of session k of run r:
- within-run variance between sessions, s_w^2: pooled over the runs of the series that have two
  or more sessions, the new run included (degrees of freedom: sum of K_r - 1);
- between-run variance beyond that, s_b^2 (night-to-night drift the sessions of one night
  share): from the stored history of the series' run means, by the mean square successive
  difference (von Neumann), which a slow drift hardly inflates, less the sessions' share;
  needs `MIN_HISTORY_RUNS` runs, else taken as 0 (the report says so);
- d = mean(new) - mean(baseline); SE^2 = 2 s_b^2 + s_w^2 (1/K_new + 1/K_base); one-sided
  Welch-Satterthwaite t test of d > 0 (slower), and a `confidence` interval of exp(d), the
  ratio of the headline p50s (geometric means of session p50s).
A job regressed when its p-value, adjusted across the suite (farm/ondevice_farm/analysis/multiple.py), is
below `alpha` AND the ratio is at least 1 + `min_effect`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from ondevice_farm.analysis.student_t import t_quantile, t_sf

#: runs of the series (the baseline included) needed before their run-to-run drift is estimated
MIN_HISTORY_RUNS = 3
#: a standard error is never taken below this (log scale: 0.1%), so identical figures do not
#: divide by zero
MIN_STANDARD_ERROR = 1e-3


class NotComparable(Exception):
    """Why two runs' latencies cannot be compared (the message is shown as the reason)."""


@dataclass(frozen=True)
class SessionComparison:
    baseline_p50: float
    new_p50: float
    #: new_p50 / baseline_p50
    ratio: float
    #: standard error of log(ratio)
    standard_error: float
    #: one-sided p-value that the new run is slower
    p_slower: float
    p_faster: float
    sessions_baseline: int
    sessions_new: int
    #: runs of the series behind the between-run drift (0: not estimated)
    history_runs: int
    within_sd: float
    between_run_sd: float
    df: float
    confidence: float = 0.95
    #: where the night-to-night drift came from: history | device (the floor alone: the job's own
    #: history is too short) | none (not estimated: the verdict waits for history)
    drift_from: str = "history"

    def _half_width(self) -> float:
        return t_quantile(0.5 + self.confidence / 2.0, self.df) * self.standard_error

    @property
    def ci_low(self) -> float:
        """The low end of the `confidence` interval of the ratio (computed when asked for)."""
        return self.ratio * math.exp(-self._half_width())

    @property
    def ci_high(self) -> float:
        return self.ratio * math.exp(self._half_width())

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline_p50": self.baseline_p50,
            "new_p50": self.new_p50,
            "ratio": self.ratio,
            "change_pct": (self.ratio - 1.0) * 100.0,
            "ci": [self.ci_low, self.ci_high],
            "p_slower": self.p_slower,
            "p_faster": self.p_faster,
            "sessions": [self.sessions_baseline, self.sessions_new],
            "history_runs": self.history_runs,
            "within_run_session_sd": self.within_sd,
            "between_run_sd": self.between_run_sd,
            "df": self.df,
            "standard_error_log": self.standard_error,
            "drift_from": self.drift_from,
        }


def _logs(p50s: list[float]) -> list[float]:
    return [math.log(v) for v in p50s if v > 0]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _pooled_within(runs: list[list[float]]) -> tuple[float, float]:
    """(variance between sessions of one run, its degrees of freedom), pooled over the runs."""
    squares, df = 0.0, 0
    for run in runs:
        if len(run) > 1:
            mean = _mean(run)
            squares += sum((v - mean) ** 2 for v in run)
            df += len(run) - 1
    return (squares / df if df else 0.0), float(df)


def compare_sessions(
    series: list[list[float]],
    new: list[float],
    *,
    confidence: float = 0.95,
    between_run_sd_floor: float = 0.0,
) -> SessionComparison:
    """`series`: the session p50s of the series' earlier successful runs, oldest first, the
    baseline (the last run in which the job succeeded) last; `new`: this run's session p50s.
    `between_run_sd_floor`: the smallest night-to-night drift (log sd) to assume where the
    history has one (the drift the suite's other jobs on the device show, see `judge_latency`)."""
    runs = [logs for logs in (_logs(r) for r in series) if logs]
    latest = _logs(new)
    if not runs or not latest:
        raise NotComparable("no baseline sessions" if not runs else "no sessions in this run")
    base = runs[-1]
    s_w2, df_w = _pooled_within([*runs, latest])
    s_b2, df_b, drift_from = 0.0, 0.0, "none"
    if len(runs) < MIN_HISTORY_RUNS and between_run_sd_floor > 0:
        s_b2, df_b, drift_from = between_run_sd_floor**2, float(MIN_HISTORY_RUNS - 1), "device"
    elif len(runs) >= MIN_HISTORY_RUNS:
        drift_from = "history"
        means = [_mean(r) for r in runs]
        mssd = _mean([(b - a) ** 2 for a, b in itertools.pairwise(means)]) / 2.0
        s_b2 = max(0.0, mssd - s_w2 * _mean([1.0 / len(r) for r in runs]), between_run_sd_floor**2)
        # the MSSD's effective degrees of freedom for independent run means, 2(n-1)^2/(3n-4)
        # (von Neumann 1941): fewer than n-1, so a short history widens the interval
        n = len(runs)
        df_b = 2.0 * (n - 1) ** 2 / (3.0 * n - 4.0)
    if df_w == 0 and df_b == 0:
        raise NotComparable("one session each and no history: nothing to judge the spread by (use repeats)")
    part_b, part_w = 2.0 * s_b2, s_w2 * (1.0 / len(latest) + 1.0 / len(base))
    variance = part_b + part_w
    denominator = (part_b**2 / df_b if df_b else 0.0) + (part_w**2 / df_w if df_w else 0.0)
    # Welch-Satterthwaite degrees of freedom of the two variance components
    df = max(1.0, variance**2 / denominator) if denominator > 0 else max(1.0, df_w + df_b)
    se = max(math.sqrt(variance), MIN_STANDARD_ERROR)
    d = _mean(latest) - _mean(base)
    p_slower = t_sf(d / se, df)
    return SessionComparison(
        baseline_p50=math.exp(_mean(base)),
        new_p50=math.exp(_mean(latest)),
        ratio=math.exp(d),
        standard_error=se,
        p_slower=p_slower,
        p_faster=1.0 - p_slower,
        sessions_baseline=len(base),
        sessions_new=len(latest),
        history_runs=len(runs) if drift_from == "history" else 0,
        within_sd=math.sqrt(s_w2),
        between_run_sd=math.sqrt(s_b2),
        df=df,
        confidence=confidence,
        drift_from=drift_from,
    )


@dataclass(frozen=True)
class LatencyCase:
    """One job's latency to judge: `group` names what shares its nights (the device)."""

    group: str
    series: list[list[float]]
    new: list[float]


def compare_cases(cases: list[LatencyCase], confidence: float = 0.95) -> list[SessionComparison]:
    """Every case compared, each job's night-to-night drift taken as at least the median drift of
    the jobs of its group: they share the device's nights, and ten runs of one job can happen to
    look calm (a floor on a variance pooled across tests, in the spirit of the moderated t of
    Smyth 2004). A job whose own history is still too short takes that median as its drift.
    Every case must be comparable (`compare_sessions` raised nothing for it)."""
    first = [compare_sessions(c.series, c.new, confidence=confidence) for c in cases]
    drifts: dict[str, list[float]] = {}
    for case, result in zip(cases, first, strict=True):
        if result.history_runs:
            drifts.setdefault(case.group, []).append(result.between_run_sd)
    floors = {group: sorted(values)[len(values) // 2] for group, values in drifts.items()}
    return [
        compare_sessions(c.series, c.new, confidence=confidence, between_run_sd_floor=floors[c.group])
        if r.between_run_sd < floors.get(c.group, 0.0)
        else r
        for c, r in zip(cases, first, strict=True)
    ]
