"""Is a job slower than its baseline? A test whose unit is the measurement session.

Latency depends on state fixed for a whole session (thread placement, allocator layout, clocks,
thermal state), so the samples of one session are not independent draws and a test on them
(farm/analysis/regression.py's Mann-Whitney, kept as a diagnostic) sees a session-to-session
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
A job regressed when its p-value, adjusted across the suite (farm/analysis/multiple.py), is
below `alpha` AND the ratio is at least 1 + `min_effect`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.analysis.student_t import t_quantile, t_sf

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
    ci_low: float
    ci_high: float
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
        }


def _logs(p50s: list[float]) -> np.ndarray:
    return np.log(np.asarray([v for v in p50s if v > 0], dtype=np.float64))


def compare_sessions(
    series: list[list[float]], new: list[float], *, confidence: float = 0.95
) -> SessionComparison:
    """`series`: the session p50s of the series' earlier successful runs, oldest first, the
    baseline (the last run in which the job succeeded) last; `new`: this run's session p50s."""
    runs = [_logs(r) for r in series if r]
    latest = _logs(new)
    if not runs or latest.size == 0:
        raise NotComparable("no baseline sessions" if not runs else "no sessions in this run")
    base = runs[-1]
    with_sessions = [r for r in [*runs, latest] if r.size > 1]
    df_w = float(sum(r.size - 1 for r in with_sessions))
    s_w2 = sum(float(((r - r.mean()) ** 2).sum()) for r in with_sessions) / df_w if df_w else 0.0
    history = runs
    s_b2, df_b = 0.0, 0.0
    if len(history) >= MIN_HISTORY_RUNS:
        means = np.asarray([r.mean() for r in history])
        mssd = float(np.mean(np.diff(means) ** 2)) / 2.0
        s_b2 = max(0.0, mssd - s_w2 * float(np.mean([1.0 / r.size for r in history])))
        df_b = float(len(history) - 1)
    if df_w == 0 and df_b == 0:
        raise NotComparable("one session each and no history: nothing to judge the spread by (use repeats)")
    part_b, part_w = 2.0 * s_b2, s_w2 * (1.0 / latest.size + 1.0 / base.size)
    variance = part_b + part_w
    df = variance**2 / ((part_b**2 / df_b if df_b else 0.0) + (part_w**2 / df_w if df_w else 0.0) or 1.0)
    df = max(1.0, df) if variance > 0 else max(1.0, df_w + df_b)
    se = max(math.sqrt(variance), MIN_STANDARD_ERROR)
    d = float(latest.mean() - base.mean())
    t = d / se
    half = t_quantile(0.5 + confidence / 2.0, df) * se
    return SessionComparison(
        baseline_p50=math.exp(float(base.mean())),
        new_p50=math.exp(float(latest.mean())),
        ratio=math.exp(d),
        ci_low=math.exp(d - half),
        ci_high=math.exp(d + half),
        p_slower=t_sf(t, df),
        p_faster=t_sf(-t, df),
        sessions_baseline=int(base.size),
        sessions_new=int(latest.size),
        history_runs=len(history) if df_b else 0,
        within_sd=math.sqrt(s_w2),
        between_run_sd=math.sqrt(s_b2),
        df=df,
    )
