"""Latency statistics from the raw samples of the timed runs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LatencyStats:
    p50: float
    p90: float
    p99: float
    mean: float
    min: float
    max: float
    std: float
    #: coefficient of variation (std / mean): above ~0.1 the device was noisy
    cv: float
    samples: tuple[float, ...]


def session_p50(samples_ms: list[float]) -> float:
    """One session's p50, the figure the session-level and paired tests compare."""
    return float(np.percentile(samples_ms, 50))


def latency_stats(samples_ms: list[float]) -> LatencyStats:
    if not samples_ms:
        raise ValueError("no timed runs: cannot compute latency statistics")
    values = np.asarray(samples_ms, dtype=np.float64)
    p50, p90, p99 = (float(v) for v in np.percentile(values, [50, 90, 99]))
    mean = float(values.mean())
    std = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return LatencyStats(
        p50=p50,
        p90=p90,
        p99=p99,
        mean=mean,
        min=float(values.min()),
        max=float(values.max()),
        std=std,
        cv=std / mean if mean > 0 and math.isfinite(std) else 0.0,
        samples=tuple(float(v) for v in values),
    )
