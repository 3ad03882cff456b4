"""Lowerings for the edges ONNX's node suite found: reductions over an empty axis and of booleans,
integer MaxPool, an empty Reshape, a zero-ratio training Dropout, training-mode BatchNormalization
and BatchNormalization with run-time parameters. ONNX's reference implementation is the oracle."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

from ondevice_farm.errors import CompileError
from ondevice_farm.runtimes.coreml.compile import predict_drift
from tests.coreml.harness import save
from tests.coreml.onnx_models import Graph, f32

pytest.importorskip("coremltools")


def _same_as_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp_path: Path) -> None:
    expected = ReferenceEvaluator(model).run(None, feeds)
    got = list(predict_drift(save(model, tmp_path), feeds, precision="fp32").values())
    assert len(got) == len(expected)
    for actual, reference in zip(got, expected, strict=True):
        assert actual.shape == reference.shape
        np.testing.assert_allclose(
            actual.astype(np.float64), reference.astype(np.float64), rtol=1e-5, atol=1e-5
        )


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceLogSumExp", "ReduceSum", "ReduceProd"])
@pytest.mark.parametrize("keepdims", [1, 0])
def test_a_reduction_over_an_empty_axis_is_its_identity(op: str, keepdims: int, tmp_path: Path) -> None:
    g = Graph(opset=20)
    x = g.input("x", [2, 0, 4])
    g.output(g.one(op, [x, g.const(np.array([1], np.int64))], keepdims=keepdims))
    _same_as_reference(g.model(), {"x": np.zeros((2, 0, 4), np.float32)}, tmp_path)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("shape", [(4, 3), (4, 0)])
def test_a_boolean_reduction_is_any_or_all(op: str, shape: tuple[int, int], tmp_path: Path) -> None:
    g = Graph(opset=20)
    x = g.input("x", list(shape), TensorProto.BOOL)
    g.output(g.one(op, [x, g.const(np.array([1], np.int64))]), TensorProto.BOOL)
    value = np.random.default_rng(0).integers(0, 2, shape).astype(bool)
    _same_as_reference(g.model(), {"x": value}, tmp_path)


def test_a_boolean_reduction_without_a_boolean_meaning_is_refused(tmp_path: Path) -> None:
    g = Graph(opset=20)
    x = g.input("x", [4, 3], TensorProto.BOOL)
    g.output(g.one("ReduceSum", [x, g.const(np.array([1], np.int64))]), TensorProto.BOOL)
    with pytest.raises(CompileError, match="ReduceSum of a boolean tensor"):
        predict_drift(save(g.model(), tmp_path), {"x": np.ones((4, 3), bool)}, precision="fp32")


@pytest.mark.parametrize("dtype", [TensorProto.UINT8, TensorProto.INT8])
def test_an_integer_max_pool_is_exact(dtype: int, tmp_path: Path) -> None:
    g = Graph(opset=22)
    x = g.input("x", [1, 2, 5, 5], dtype)
    g.output(g.one("MaxPool", [x], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]), dtype)
    numpy_type = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    info = np.iinfo(numpy_type)
    value = np.random.default_rng(1).integers(info.min, info.max, (1, 2, 5, 5)).astype(numpy_type)
    _same_as_reference(g.model(), {"x": value}, tmp_path)


def test_reshape_allowzero_to_an_empty_shape(tmp_path: Path) -> None:
    g = Graph(opset=21)
    x = g.input("x", [0, 3, 4])
    g.output(g.one("Reshape", [x, g.const(np.array([3, 4, 0], np.int64))], allowzero=1))
    _same_as_reference(g.model(), {"x": np.zeros((0, 3, 4), np.float32)}, tmp_path)


def _training_dropout(ratio: float) -> onnx.ModelProto:
    g = Graph(opset=22)
    x = g.input("x", [3, 4])
    y, mask = g.op(
        "Dropout", [x, g.const(np.array(ratio, np.float32)), g.const(np.array(True))], n_out=2, seed=0
    )
    g.output(y)
    g.output(mask, TensorProto.BOOL)
    return g.model()


def test_a_training_dropout_of_ratio_zero_drops_nothing(tmp_path: Path) -> None:
    _same_as_reference(_training_dropout(0.0), {"x": f32(3, 4)}, tmp_path)


def test_a_training_dropout_that_drops_is_refused_as_random(tmp_path: Path) -> None:
    with pytest.raises(CompileError, match="training-mode Dropout is random"):
        predict_drift(save(_training_dropout(0.5), tmp_path), {"x": f32(3, 4)}, precision="fp32")


@pytest.mark.parametrize("rank", [2, 4])
def test_training_mode_batch_norm_uses_the_batch_statistics(rank: int, tmp_path: Path) -> None:
    g = Graph(opset=15)
    shape = [2, 3] if rank == 2 else [2, 3, 4, 5]
    x = g.input("x", shape)
    params = [g.const(f32(3, seed=s)) for s in (1, 2, 3)] + [g.const(np.abs(f32(3, seed=4)) + 0.1)]
    y, mean, var = g.op("BatchNormalization", [x, *params], n_out=3, training_mode=1, momentum=0.8)
    for name in (y, mean, var):
        g.output(name)
    _same_as_reference(g.model(), {"x": f32(*shape)}, tmp_path)


def test_batch_norm_with_parameters_fed_at_run_time(tmp_path: Path) -> None:
    g = Graph(opset=15)
    x = g.input("x", [2, 3, 4])
    names = [g.input(name, [3]) for name in ("scale", "bias", "mean", "var")]
    g.output(g.one("BatchNormalization", [x, *names], epsilon=1e-3))
    feeds = {"x": f32(2, 3, 4), "scale": f32(3, seed=1), "bias": f32(3, seed=2), "mean": f32(3, seed=3)}
    feeds["var"] = np.abs(f32(3, seed=4)) + 0.1
    _same_as_reference(g.model(), feeds, tmp_path)


@pytest.mark.parametrize(("low", "high"), [(-0.5, 0.5), (0.5, -0.5)])
def test_clip_bounds_fed_at_run_time(low: float, high: float, tmp_path: Path) -> None:
    g = Graph(opset=13)
    x, lo, hi = g.input("x", [3, 4]), g.input("lo", []), g.input("hi", [])
    g.output(g.one("Clip", [x, lo, hi]))
    g.output(g.one("Clip", [x, lo]))
    feeds = {"x": f32(3, 4), "lo": np.array(low, np.float32), "hi": np.array(high, np.float32)}
    _same_as_reference(g.model(), feeds, tmp_path)


@pytest.mark.parametrize("k", [-7, -1, 0, 2, 9])
@pytest.mark.parametrize("upper", [1, 0])
def test_trilu_with_k_fed_at_run_time(k: int, upper: int, tmp_path: Path) -> None:
    g = Graph(opset=14)
    x, offset = g.input("x", [2, 4, 6]), g.input("k", [], TensorProto.INT64)
    g.output(g.one("Trilu", [x, offset], upper=upper))
    _same_as_reference(g.model(), {"x": f32(2, 4, 6), "k": np.array(k, np.int64)}, tmp_path)
