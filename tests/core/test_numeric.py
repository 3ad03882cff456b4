from __future__ import annotations

import math

import numpy as np
import pytest

from farm.analysis.latency import latency_stats
from farm.analysis.numeric import MAX_SNR_DB, Tolerance, compare_outputs, diff_output


def test_identical_outputs_are_exact() -> None:
    x = np.linspace(-1, 1, 100, dtype=np.float32)
    d = diff_output(x, x.copy())
    assert (d.max_abs, d.mean_abs, d.rmse, d.snr_db) == (0.0, 0.0, 0.0, MAX_SNR_DB)
    assert d.cosine == pytest.approx(1.0)


def test_snr_matches_its_definition() -> None:
    rng = np.random.default_rng(1)
    ref = rng.standard_normal(10_000)
    noise = rng.standard_normal(10_000) * 0.01  # 40 dB below a unit-variance signal
    d = diff_output(ref, ref + noise)
    expected = 10 * math.log10(np.sum(ref**2) / np.sum(noise**2))
    assert d.snr_db == pytest.approx(expected)
    assert 39 < d.snr_db < 41
    assert d.max_abs == pytest.approx(np.abs(noise).max())
    assert d.rmse == pytest.approx(np.sqrt(np.mean(noise**2)))


def test_fp16_rounding_fails_an_fp32_tolerance_but_passes_an_fp16_one() -> None:
    rng = np.random.default_rng(2)
    ref = rng.standard_normal((8, 1000)).astype(np.float32)
    fp16 = ref.astype(np.float16).astype(np.float32)
    strict = compare_outputs({"y": ref}, {"y": fp16}, Tolerance(snr_db_min=80, cosine_min=0.99999))
    loose = compare_outputs({"y": ref}, {"y": fp16}, Tolerance(snr_db_min=30, cosine_min=0.999))
    assert not strict.passed and loose.passed


def test_shape_mismatch_and_missing_output_fail() -> None:
    tol = Tolerance(snr_db_min=0, cosine_min=0)
    assert not compare_outputs({"y": np.zeros(3)}, {"y": np.zeros(4)}, tol).passed
    check = compare_outputs({"y": np.zeros(3), "z": np.zeros(1)}, {"y": np.zeros(3)}, tol)
    assert check.missing == ("z",) and not check.passed


def test_latency_percentiles_from_samples() -> None:
    stats = latency_stats([float(v) for v in range(1, 101)])
    assert stats.p50 == pytest.approx(50.5)
    assert stats.p99 == pytest.approx(99.01)
    assert stats.min == 1 and stats.max == 100
    assert stats.cv == pytest.approx(stats.std / stats.mean)
    with pytest.raises(ValueError):
        latency_stats([])
