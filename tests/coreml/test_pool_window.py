"""Dilated pooling and MaxPool's Indices, spelt out per kernel cell: the fp32 program matches
ONNX Runtime (values, and the flat indices in both storage orders)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

from ondevice_farm.runtimes.coreml.compile import predict_drift
from tests.coreml.harness import assert_fp32_matches, random_feeds, save
from tests.coreml.onnx_models import Graph


def single_op(
    op_type: str, shapes: list[list[int]], *, n_out: int = 1, opset: int = 17, **attrs: object
) -> onnx.ModelProto:
    """One pooling node; a second output is MaxPool's int64 Indices."""
    g = Graph(opset=opset)
    names = g.op(op_type, [g.input("x", shape) for shape in shapes], n_out=n_out, **attrs)
    for index, name in enumerate(names):
        g.output(name, TensorProto.INT64 if index else TensorProto.FLOAT)
    return g.model()


pytest.importorskip("coremltools")

CASES: dict[str, Callable[[], onnx.ModelProto]] = {
    "max_dilated_pads_ceil": lambda: single_op(
        "MaxPool",
        [[1, 2, 9, 8]],
        kernel_shape=[3, 2],
        strides=[2, 2],
        dilations=[2, 3],
        pads=[1, 0, 2, 1],
        ceil_mode=1,
    ),
    "max_dilated_1d_pads": lambda: single_op(
        "MaxPool", [[2, 3, 11]], kernel_shape=[3], dilations=[2], strides=[2], pads=[2, 1]
    ),
    "max_dilated_3d": lambda: single_op(
        "MaxPool", [[1, 1, 6, 6, 6]], kernel_shape=[2, 2, 2], dilations=[2, 2, 2]
    ),
    "max_indices_pads": lambda: single_op(
        "MaxPool", [[2, 3, 6, 7]], n_out=2, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
    ),
    "max_indices_column_major": lambda: single_op(
        "MaxPool", [[1, 2, 5, 6]], n_out=2, kernel_shape=[2, 2], strides=[2, 2], storage_order=1
    ),
    "max_indices_dilated_ceil": lambda: single_op(
        "MaxPool", [[1, 2, 7, 7]], n_out=2, kernel_shape=[2, 2], dilations=[2, 2], strides=[2, 2], ceil_mode=1
    ),
    "avg_dilated_exclude_pad": lambda: single_op(
        "AveragePool", [[1, 2, 8, 9]], opset=19, kernel_shape=[3, 3], dilations=[2, 2], pads=[1, 2, 1, 2]
    ),
    "avg_dilated_include_pad_ceil": lambda: single_op(
        "AveragePool",
        [[1, 2, 8, 9]],
        opset=19,
        kernel_shape=[2, 3],
        strides=[2, 2],
        dilations=[2, 1],
        pads=[1, 1, 1, 1],
        count_include_pad=1,
        ceil_mode=1,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_windowed_pool_matches_onnxruntime_in_fp32(case: str, tmp_path: Path) -> None:
    model = CASES[case]()
    assert_fp32_matches(save(model, tmp_path), random_feeds(model))


def test_same_padding_with_dilations_follows_the_onnx_spec(tmp_path: Path) -> None:
    # ONNX: SAME gives ceil(11 / 2) = 6 outputs, padded for the dilated kernel; ONNX Runtime pads
    # for the undilated kernel and gives 5. The farm follows the spec (and ONNX's reference).
    model = single_op(
        "MaxPool", [[2, 3, 11]], kernel_shape=[3], dilations=[2], strides=[2], auto_pad="SAME_UPPER"
    )
    feeds = random_feeds(model)
    (expected,) = ReferenceEvaluator(model).run(None, feeds)
    (actual,) = predict_drift(save(model, tmp_path), feeds, precision="fp32").values()
    assert expected.shape == (2, 3, 6)
    np.testing.assert_allclose(actual, expected, rtol=1e-6)
