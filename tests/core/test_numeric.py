from __future__ import annotations

import math

import numpy as np
import pytest

from ondevice_farm.analysis.latency import latency_stats
from ondevice_farm.analysis.numeric import MAX_SNR_DB, Tolerance, compare_outputs, diff_output
from ondevice_farm.analysis.tolerance import DEFAULT_TOLERANCES, default_tolerance, parse_tolerance
from ondevice_farm.errors import UsageError
from ondevice_farm.targets import Target

FP32, FP16, INT8 = DEFAULT_TOLERANCES["fp32"], DEFAULT_TOLERANCES["fp16"], DEFAULT_TOLERANCES["int8"]


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
    assert check.missing == ("z",) and not check.passed and check.state == "failed"
    assert check.failures == ["z: missing from the device's outputs"]


@pytest.mark.parametrize(
    ("device", "counts"),
    [
        (np.array([np.inf, -np.inf, 1, 1, 1], np.float32), "2 (2 inf, 0 NaN) of 5 on the device"),
        (np.array([np.nan, 1, 1, 1, 1], np.float32), "1 (0 inf, 1 NaN) of 5 on the device"),
    ],
)
def test_non_finite_device_values_fail_by_name_and_count_never_raise(device: np.ndarray, counts: str) -> None:
    reference = np.ones(5, np.float32)
    check = compare_outputs({"probs": reference}, {"probs": device}, FP16)
    assert check.state == "failed"
    assert check.failures == [f"probs: non-finite values: {counts}, 0 in the reference"]
    diff = check.outputs["probs"]
    assert math.isnan(diff.snr_db) and math.isnan(diff.cosine)  # never a finite SNR, never 200 dB
    assert diff.max_abs == 0.0  # the finite rest agrees


def test_non_finite_reference_values_are_counted_separately() -> None:
    reference = np.array([np.inf, 1.0, np.nan])
    check = compare_outputs({"y": reference}, {"y": reference.copy()}, FP32)
    diff = check.outputs["y"]
    assert diff.nonfinite_reference == {"nan": 1, "inf": 1} and diff.nonfinite_actual == {"nan": 1, "inf": 1}
    assert check.state == "failed" and check.failures[0].endswith(", 2 (1 inf, 1 NaN) in the reference")


def test_all_zero_outputs_agree() -> None:
    check = compare_outputs({"y": np.zeros(10, np.float32)}, {"y": np.zeros(10, np.float32)}, FP32)
    assert check.passed and check.outputs["y"].snr_db == MAX_SNR_DB and check.outputs["y"].cosine == 1.0


def test_an_all_zero_reference_has_no_snr_and_is_judged_by_absolute_error() -> None:
    close = diff_output(np.zeros(10), np.full(10, 1e-9), FP32)
    far = diff_output(np.zeros(10), np.full(10, 1e-2), FP32)
    assert math.isnan(close.snr_db) and math.isnan(close.cosine)
    assert close.passes(FP32) and not far.passes(FP32)


def test_a_near_zero_output_on_the_host_passes_by_absolute_error() -> None:
    """The OCR detector case: a probability map of ~1e-6, fp32 against fp32, max |err| 1.5e-7.
    SNR and cosine say nothing about such a signal; allclose does."""
    rng = np.random.default_rng(3)
    reference = (rng.random(10_000) * 1e-6).astype(np.float32)
    device = reference + rng.uniform(-1.5e-7, 1.5e-7, reference.shape).astype(np.float32)
    diff = diff_output(reference, device, FP32)
    assert diff.snr_db < FP32.snr_db_min and diff.cosine < FP32.cosine_min  # the old rule failed it
    assert diff.outside == 0 and diff.passes(FP32)


def test_tiny_outputs_are_as_good_as_atol_says() -> None:
    """At the 1e-8 scale a 2x error is inside the default atol; a user whose outputs live there
    tightens it, and then it fails."""
    reference = np.full(100, 1e-8)
    assert diff_output(reference, reference * 2, FP32).passes(FP32)
    strict = parse_tolerance(["atol=1e-12"]).apply(FP32)
    assert not diff_output(reference, reference * 2, strict).passes(strict)
    assert diff_output(reference, reference * (1 + 1e-6), strict).passes(strict)


def test_allclose_counts_the_elements_outside() -> None:
    reference = np.linspace(1, 2, 100)
    device = reference.copy()
    device[:3] += 0.5
    diff = diff_output(reference, device, FP32)
    assert diff.outside == 3 and diff.outside_fraction == pytest.approx(0.03)
    loose = parse_tolerance(["outside=0.05"]).apply(FP32)
    assert not diff.passes(FP32) and diff_output(reference, device, loose).passes(loose)


def test_an_off_by_one_class_index_fails_although_its_snr_is_high() -> None:
    reference, device = np.array([281], np.int64), np.array([282], np.int64)
    check = compare_outputs({"class": reference}, {"class": device}, FP16)
    diff = check.outputs["class"]
    assert diff.kind == "integer" and diff.mismatches == 1 and diff.exact_match == 0.0
    assert math.isnan(diff.snr_db) and math.isnan(diff.cosine)  # no SNR/cosine for indices
    expected = "class: 1 of 1 values differ (exact match 0 %, needs 100 %), largest difference 1"
    assert check.failures == [expected]
    assert compare_outputs({"class": reference}, {"class": reference.astype(np.int32)}, FP16).passed


def test_integer_outputs_returned_as_floats_compare_exactly() -> None:
    reference = np.arange(6, dtype=np.int64)
    assert compare_outputs({"y": reference}, {"y": reference.astype(np.float32)}, FP32).passed
    check = compare_outputs({"y": reference}, {"y": reference + np.float32(0.5)}, FP32)
    assert check.outputs["y"].mismatches == 6 and not check.passed


def test_bool_masks_need_every_element() -> None:
    reference = np.array([[True, False, True, True]])
    device = np.array([[True, True, True, True]])
    check = compare_outputs({"mask": reference}, {"mask": device}, FP32)
    assert check.outputs["mask"].kind == "bool" and check.outputs["mask"].mismatches == 1
    assert check.failures == ["mask: 1 of 4 values differ (exact match 75 %, needs 100 %)"]
    relaxed = parse_tolerance(["exact=0.75"]).apply(FP32)
    assert compare_outputs({"mask": reference}, {"mask": device}, relaxed).passed


def test_strings_compare_for_equality() -> None:
    reference = np.array(["cat", "dog"])
    same = np.array(["cat", "dog"], dtype=object)  # what ONNX Runtime returns
    assert compare_outputs({"label": reference}, {"label": same}, FP32).passed
    check = compare_outputs({"label": reference}, {"label": np.array(["cat", "eel"], dtype=object)}, FP32)
    assert check.failures == ["label: 1 of 2 strings differ (exact match 50 %, needs 100 %)"]
    numbers = compare_outputs({"label": reference}, {"label": np.array([1.0, 2.0])}, FP32)
    assert numbers.failures == ["label: <U3 in the reference, float64 on the device"]


def test_a_device_without_outputs_is_not_compared_never_failed() -> None:
    check = compare_outputs({"y": np.ones(3)}, {}, FP32, no_outputs_reason="perf_test returns no outputs")
    assert check.state == "not_compared" and not check.passed and check.failures == []
    assert check.not_compared_reason == "perf_test returns no outputs"


def test_default_tolerances_follow_the_computed_precision() -> None:
    cpu, cuda, nnapi, ane = (Target.parse(t) for t in ("ort/cpu", "ort/cuda", "ort/nnapi", "coreml/ane"))
    assert default_tolerance(cpu, "fp32").precision == "fp32"
    assert default_tolerance(cpu, "int8").precision == "int8"
    tf32 = default_tolerance(cuda, "fp32")
    assert (tf32.precision, tf32.computed_in) == ("fp16", "tf32")
    assert default_tolerance(nnapi, "fp32").precision == "fp16"
    assert default_tolerance(nnapi, "int8").precision == "int8"
    assert default_tolerance(ane, "fp16").precision == "fp16"
    assert default_tolerance(ane, "fp32").precision == "fp32"


def test_tolerance_overrides_by_precision() -> None:
    overrides = parse_tolerance(["atol=1e-4,snr_db=70", "int8:snr_db=12,cosine_min=0.9"])
    fp32 = overrides.apply(FP32)
    assert (fp32.atol, fp32.snr_db_min, fp32.rtol, fp32.source) == (1e-4, 70.0, FP32.rtol, "--tolerance")
    int8 = overrides.apply(INT8)
    assert (int8.atol, int8.snr_db_min, int8.cosine_min) == (1e-4, 12.0, 0.9)
    assert overrides.to_texts() == ["atol=0.0001,snr_db=70", "int8:snr_db=12,cosine=0.9"]
    assert not parse_tolerance([])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("snr=3", "use [PRECISION:]KEY=VALUE"),
        ("atol", "use [PRECISION:]KEY=VALUE"),
        ("atol=x", "'x' is not a number"),
        ("atol=-1", "cannot be negative"),
        ("exact=2", "a fraction is at most 1"),
        ("bf16:atol=1", "unknown precision 'bf16'"),
        ("atol=nan", "must be finite"),
    ],
)
def test_bad_tolerances_are_one_readable_error(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_tolerance([text])


def test_latency_percentiles_from_samples() -> None:
    stats = latency_stats([float(v) for v in range(1, 101)])
    assert stats.p50 == pytest.approx(50.5)
    assert stats.p99 == pytest.approx(99.01)
    assert stats.min == 1 and stats.max == 100
    assert stats.cv == pytest.approx(stats.std / stats.mean)
    with pytest.raises(ValueError):
        latency_stats([])
