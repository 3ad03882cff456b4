"""Resize beyond MIL's upsample ops, as interpolation matrices: the fp32 program matches ONNX's
reference for each mode, coordinate transform and nearest mode, any scale and any axis, and ONNX
Runtime where it implements the same (cubic, non-integral linear)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

from ondevice_farm.runtimes.coreml.compile import predict_drift
from tests.coreml.harness import assert_fp32_matches, random_feeds, save
from tests.coreml.onnx_models import single_op

pytest.importorskip("coremltools")

NO_ROI = np.array([], np.float32)

#: name -> (input shape, scales or None, sizes or None, attributes)
CASES: dict[str, tuple[list[int], list[float] | None, list[int] | None, dict[str, Any]]] = {
    "cubic_half_pixel_x1.5": ([1, 2, 4, 5], [1, 1, 1.5, 1.5], None, {"mode": "cubic"}),
    "cubic_exclude_outside": (
        [1, 1, 5, 5],
        [1, 1, 0.8, 1.6],
        None,
        {"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5},
    ),
    "linear_downsample_0.6": ([1, 2, 5, 7], [1, 1, 0.6, 0.6], None, {"mode": "linear"}),
    "linear_antialias_sizes": ([1, 1, 8, 9], None, [1, 1, 3, 4], {"mode": "linear", "antialias": 1}),
    "cubic_antialias": ([1, 1, 8, 8], [1, 1, 0.5, 0.7], None, {"mode": "cubic", "antialias": 1}),
    "linear_half_pixel_symmetric": (
        [1, 1, 4, 5],
        [1, 1, 1.7, 0.7],
        None,
        {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"},
    ),
    "nearest_align_corners_ceil": (
        [1, 2, 3, 4],
        None,
        [1, 2, 7, 5],
        {"mode": "nearest", "coordinate_transformation_mode": "align_corners", "nearest_mode": "ceil"},
    ),
    "nearest_downsample_prefer_ceil": (
        [1, 1, 6, 7],
        [1, 1, 0.5, 0.43],
        None,
        {"mode": "nearest", "nearest_mode": "round_prefer_ceil"},
    ),
    "linear_5d_any_axis": ([2, 3, 4, 3, 2], [1, 1.5, 1, 2, 1], None, {"mode": "linear"}),
    "nearest_not_larger": (
        [1, 1, 4, 6],
        None,
        [1, 1, 7, 7],
        {"mode": "nearest", "keep_aspect_ratio_policy": "not_larger"},
    ),
}


def _model(name: str) -> Any:
    shape, scales, sizes, attrs = CASES[name]
    if scales is not None:
        consts = [NO_ROI, np.array(scales, np.float32)]
    else:
        consts = [NO_ROI, np.array([], np.float32), np.array(sizes, np.int64)]
    return single_op("Resize", [shape], consts, opset=19, **attrs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_resize_matches_onnx_reference_in_fp32(name: str, tmp_path: Path) -> None:
    model = _model(name)
    feeds = random_feeds(model)
    (expected,) = ReferenceEvaluator(model).run(None, feeds)
    (actual,) = predict_drift(save(model, tmp_path), feeds, precision="fp32").values()
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["cubic_half_pixel_x1.5", "linear_downsample_0.6"])
def test_resize_matches_onnxruntime_in_fp32(name: str, tmp_path: Path) -> None:
    model = _model(name)
    assert_fp32_matches(save(model, tmp_path), random_feeds(model))


def test_tf_crop_and_resize_extrapolates_outside_the_crop(tmp_path: Path) -> None:
    roi = np.array([0, 0, 0.4, -0.2, 1, 1, 1.3, 0.9], np.float32)
    model = single_op(
        "Resize",
        [[1, 1, 4, 5]],
        [roi, np.array([], np.float32), np.array([1, 1, 3, 6], np.int64)],
        opset=19,
        mode="linear",
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=7.5,
    )
    feeds = random_feeds(model)
    (expected,) = ReferenceEvaluator(model).run(None, feeds)
    (actual,) = predict_drift(save(model, tmp_path), feeds, precision="fp32").values()
    assert np.any(expected == np.float32(7.5))
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


def test_nearest_is_exact_in_fp16(tmp_path: Path) -> None:
    model = _model("nearest_downsample_prefer_ceil")
    feeds = random_feeds(model)
    (expected,) = ReferenceEvaluator(model).run(None, feeds)
    (actual,) = predict_drift(save(model, tmp_path), feeds, precision="fp16").values()
    np.testing.assert_array_equal(actual, expected.astype(np.float16).astype(np.float32))
