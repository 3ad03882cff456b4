"""What a generation job's figures must be, recomputed from their own samples: a summary that
says min <= median <= max holds for any numbers; one that equals its samples' statistics can fail."""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np
import pytest


def assert_summarises(summary: dict[str, Any], count: int) -> None:
    """A `{median, mean, std, min, max, samples}` summary (generate/metrics.py) of `count` positive
    samples, its figures those of the samples (rounded as stored: within 0.1%)."""
    samples = summary["samples"]
    assert len(samples) == count and all(s > 0 for s in samples), samples
    # rounding is monotonic: the extremes of the rounded samples are the rounded extremes
    assert (summary["min"], summary["max"]) == (min(samples), max(samples))
    assert summary["median"] == pytest.approx(statistics.median(samples), rel=1e-3)
    assert summary["mean"] == pytest.approx(statistics.fmean(samples), rel=1e-3)
    if count > 1:
        assert summary["std"] == pytest.approx(statistics.stdev(samples), rel=1e-2, abs=1e-3)


def assert_percentiles(latency: dict[str, Any], count: int) -> None:
    """p50/p90/p99 of the token latencies: numpy's linear percentiles of the samples (the farm's
    method, analysis/sessions.py), computed here independently."""
    samples = np.asarray(latency["samples"], dtype=np.float64)
    assert len(samples) == count and (samples > 0).all()
    for point in (50, 90, 99):
        assert latency[f"p{point}"] == pytest.approx(float(np.percentile(samples, point)), rel=1e-3)
