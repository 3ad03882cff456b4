"""QuantizeLinear / DequantizeLinear lowered as the spec's arithmetic: to and from float8 and float4,
blocked quantization (`block_size`), and a scale or zero point known only at run time. Each against
ONNX's reference implementation."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

from ondevice_farm.errors import CompileError
from ondevice_farm.runtimes.coreml.compile import predict_drift
from tests.coreml.harness import save
from tests.coreml.onnx_models import Graph

pytest.importorskip("coremltools")


def _same_as_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp_path: Path) -> None:
    expected = ReferenceEvaluator(model).run(None, feeds)
    got = list(predict_drift(save(model, tmp_path), feeds, precision="fp32").values())
    for actual, reference in zip(got, expected, strict=True):
        np.testing.assert_array_equal(actual, reference.astype(actual.dtype))


def _typed_zero(dtype: int, value: float = 0.0) -> onnx.TensorProto:
    return onnx.helper.make_tensor("zp", dtype, [], [value])


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize(
    "to",
    [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT4E2M1],
)
def test_quantize_to_a_narrow_float_rounds_as_the_reference(to: int, saturate: int, tmp_path: Path) -> None:
    g = Graph(opset=23)
    x = g.input("x", [40])
    g.inits.append(_typed_zero(to, 0.5 if to == TensorProto.FLOAT4E2M1 else 0.0))
    attrs = {"saturate": saturate} if to != TensorProto.FLOAT4E2M1 else {}
    g.output(g.one("QuantizeLinear", [x, g.const(np.array(0.37, np.float32)), "zp"], **attrs), to)
    feeds = {"x": np.concatenate([np.linspace(-3e4, 3e4, 20), np.linspace(-3, 3, 20)]).astype(np.float32)}
    _same_as_reference(g.model(), feeds, tmp_path)


@pytest.mark.parametrize("source", [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.FLOAT4E2M1])
def test_dequantize_a_narrow_float_input_as_the_reference(source: int, tmp_path: Path) -> None:
    g = Graph(opset=23)
    x = g.input("x", [6], source)
    g.inits.append(_typed_zero(source))
    g.output(g.one("DequantizeLinear", [x, g.const(np.array(0.5, np.float32)), "zp"]))
    values = np.array([-6, -1.5, 0, 0.5, 3, 6], np.float32)
    _same_as_reference(
        g.model(), {"x": values.astype(onnx.helper.tensor_dtype_to_np_dtype(source))}, tmp_path
    )


def test_a_nonzero_float8_zero_point_is_refused(tmp_path: Path) -> None:
    g = Graph(opset=23)
    x = g.input("x", [2], TensorProto.FLOAT8E4M3FN)
    g.inits.append(_typed_zero(TensorProto.FLOAT8E4M3FN, 2.0))
    g.output(g.one("DequantizeLinear", [x, g.const(np.array(0.5, np.float32)), "zp"]))
    with pytest.raises(CompileError, match="a float8 zero point must be a constant 0"):
        predict_drift(
            save(g.model(), tmp_path), {"x": np.zeros(2, ml_dtypes.float8_e4m3fn)}, precision="fp32"
        )


@pytest.mark.parametrize("axis", [0, 1])
def test_blocked_quantization_repeats_each_scale_over_its_block(axis: int, tmp_path: Path) -> None:
    # 5 is not a multiple of the block size 2: the last block is cut short
    g = Graph(opset=21)
    x = g.input("x", [5, 5])
    shape = [3, 5] if axis == 0 else [5, 3]
    rng = np.random.default_rng(axis)
    scale = g.const(rng.uniform(0.01, 0.1, shape).astype(np.float32))
    zero = g.const(rng.integers(-5, 5, shape).astype(np.int8))
    q = g.one("QuantizeLinear", [x, scale, zero], axis=axis, block_size=2)
    g.output(q, TensorProto.INT8)
    g.output(g.one("DequantizeLinear", [q, scale, zero], axis=axis, block_size=2))
    _same_as_reference(g.model(), {"x": rng.uniform(-4, 4, (5, 5)).astype(np.float32)}, tmp_path)


def test_a_scale_and_zero_point_known_only_at_run_time(tmp_path: Path) -> None:
    g = Graph(opset=21)
    x = g.input("x", [2, 3])
    scale, zero = g.input("scale", []), g.input("zero", [], TensorProto.UINT8)
    q = g.one("QuantizeLinear", [x, scale, zero])
    g.output(q, TensorProto.UINT8)
    g.output(g.one("DequantizeLinear", [q, scale, zero]))
    feeds: dict[str, np.ndarray] = {
        "x": np.array([[-1, 0, 0.3], [0.7, 1.1, 9]], np.float32),
        "scale": np.array(0.02, np.float32),
        "zero": np.array(60, np.uint8),
    }
    _same_as_reference(g.model(), feeds, tmp_path)
