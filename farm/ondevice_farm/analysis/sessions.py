"""A job's latency over its measurement sessions (repeats): per-session summaries, spread, headline.

Definitions (docs/results.md, "Latency over sessions"):
- percentiles: numpy's "linear" method (Hyndman & Fan type 7), the same for every runner that
  reports samples; a runner that reports only percentiles names its own method with the figure;
- a session's p50: the median of its timed samples;
- the job's headline `p50`: the geometric mean of its sessions' p50s (one session: its median).
  Latency state is fixed per session, so the session is the unit; the geometric mean is the
  statistic the regression test compares (farm/ondevice_farm/analysis/session_test.py), so the change shown
  is the change tested. p90/p99/mean/min/max/std/cv are over all samples pooled;
- within-session spread: the median over sessions of MAD/median (MAD scaled by 1.4826, so it
  reads like a coefficient of variation for normal noise but one outlier does not move it);
- between-session spread: the standard deviation of the log session p50s (about the relative
  spread of session p50s), null with one session.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

PERCENTILE_METHOD: Literal["linear"] = "linear"
#: 1.4826 x MAD estimates a normal standard deviation
MAD_SCALE = 1.4826


def percentiles(values: np.ndarray, points: list[float]) -> list[float]:
    return [float(v) for v in np.percentile(values, points, method=PERCENTILE_METHOD)]


def robust_spread(values: np.ndarray) -> tuple[float, float]:
    """(MAD/median, IQR/median) of samples: relative spreads one outlier cannot move."""
    median = float(np.median(values))
    if median <= 0:
        return 0.0, 0.0
    mad = MAD_SCALE * float(np.median(np.abs(values - median)))
    q1, q3 = percentiles(values, [25, 75])
    return mad / median, (q3 - q1) / median


def session_summary(samples: list[float]) -> dict[str, Any]:
    values = np.asarray(samples, dtype=np.float64)
    p50, p90, p99 = percentiles(values, [50, 90, 99])
    mad, iqr = robust_spread(values)
    return {
        "p50": p50,
        "p90": p90,
        "p99": p99,
        "mean": float(values.mean()),
        "min": float(values.min()),
        "max": float(values.max()),
        "mad_over_median": mad,
        "iqr_over_median": iqr,
        "samples": [float(v) for v in values],
    }


def headline_p50(session_p50s: list[float]) -> float:
    """The geometric mean of the sessions' p50s."""
    logs = np.log(np.asarray([v for v in session_p50s if v > 0], dtype=np.float64))
    return float(np.exp(logs.mean())) if logs.size else 0.0


def between_session_sd(session_p50s: list[float]) -> float | None:
    logs = np.log(np.asarray([v for v in session_p50s if v > 0], dtype=np.float64))
    return float(logs.std(ddof=1)) if logs.size > 1 else None


def sessions_document(sessions: list[list[float]]) -> dict[str, Any]:
    """`latency_ms` of a job measured in one or more sessions (each a non-empty list of samples)."""
    if not sessions or not all(sessions):
        raise ValueError("no timed runs: cannot compute latency statistics")
    repeats = [session_summary(s) for s in sessions]
    pooled = np.asarray([v for s in sessions for v in s], dtype=np.float64)
    p90, p99 = percentiles(pooled, [90, 99])
    mean = float(pooled.mean())
    std = float(pooled.std(ddof=1)) if pooled.size > 1 else 0.0
    p50s = [r["p50"] for r in repeats]
    mad, iqr = robust_spread(pooled)
    return {
        "p50": headline_p50(p50s) if len(p50s) > 1 else p50s[0],
        "p90": p90,
        "p99": p99,
        "mean": mean,
        "min": float(pooled.min()),
        "max": float(pooled.max()),
        "std": std,
        "cv": std / mean if mean > 0 and math.isfinite(std) else 0.0,
        "mad_over_median": mad,
        "iqr_over_median": iqr,
        "samples": [float(v) for v in pooled],
        "percentile_method": PERCENTILE_METHOD,
        "p50_definition": "geometric mean of the sessions' medians" if len(p50s) > 1 else "median",
        "repeats": repeats,
        "spread": {
            "sessions": len(repeats),
            "within_session": float(np.median([r["mad_over_median"] for r in repeats])),
            "between_session": between_session_sd(p50s),
            "session_p50_min": min(p50s),
            "session_p50_max": max(p50s),
        },
    }


def session_p50s(latency: dict[str, Any]) -> list[float]:
    """A stored job's session medians: its repeats', or its one p50 for a job from before repeats
    (or a runner that reported percentiles only)."""
    repeats = latency.get("repeats") or []
    if repeats:
        return [float(r["p50"]) for r in repeats if r.get("p50")]
    return [float(latency["p50"])] if latency.get("p50") else []
