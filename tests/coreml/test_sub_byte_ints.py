"""ONNX's 4-bit and 2-bit integers on CoreML: held in int32 (exact), at the program boundary and
inside it; QuantizeLinear to them saturates as the spec says; a Cast to them, undefined outside
their range in ONNX, is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

from ondevice_farm.errors import CompileError
from ondevice_farm.runtimes.coreml.compile import compile_coreml, predict_drift
from ondevice_farm.targets import Target
from tests.coreml.harness import save
from tests.coreml.onnx_models import Graph

pytest.importorskip("coremltools")

TYPES = {
    "int4": TensorProto.INT4,
    "uint4": TensorProto.UINT4,
    "int2": TensorProto.INT2,
    "uint2": TensorProto.UINT2,
}


def _quantize_dequantize(kind: str) -> onnx.ModelProto:
    g = Graph(opset=21)
    x = g.input("x", [2, 5])
    zero = onnx.numpy_helper.from_array(np.array(1 if kind.startswith("u") else 0, np.int32), "zp")
    zero.data_type = TYPES[kind]
    g.inits.append(zero)
    q = g.one("QuantizeLinear", [x, g.const(np.float32(0.4)), "zp"])
    g.output(g.one("DequantizeLinear", [q, g.const(np.float32(0.4)), "zp"]))
    g.output(g.one("Cast", [q], to=TensorProto.FLOAT))
    return g.model()


@pytest.mark.parametrize("kind", sorted(TYPES))
def test_quantize_to_a_sub_byte_int_saturates_as_the_reference(kind: str, tmp_path: Path) -> None:
    model = _quantize_dequantize(kind)
    feeds = {"x": np.linspace(-4, 4, 10, dtype=np.float32).reshape(2, 5)}
    expected = ReferenceEvaluator(model).run(None, feeds)
    got = list(predict_drift(save(model, tmp_path), feeds, precision="fp32").values())
    for actual, reference in zip(got, expected, strict=True):
        np.testing.assert_allclose(actual, reference.astype(np.float32), rtol=1e-6)


def test_a_sub_byte_input_is_int32_in_the_program_and_the_report_says_so(tmp_path: Path) -> None:
    g = Graph(opset=21)
    x = g.input("x", [2, 3], TensorProto.INT4)
    g.output(g.one("Cast", [x], to=TensorProto.FLOAT))
    path = save(g.model(), tmp_path)
    value = np.array([[-8, -1, 0], [1, 5, 7]], np.int32)
    (got,) = predict_drift(path, {"x": value}, precision="fp32").values()
    np.testing.assert_array_equal(got, value.astype(np.float32))
    artifact = compile_coreml(path, Target.parse("coreml/cpu"), tmp_path / "out")
    assert any("x is int4 in ONNX and int32" in note for note in artifact.report.notes)


def test_a_cast_to_a_sub_byte_int_is_refused(tmp_path: Path) -> None:
    g = Graph(opset=21)
    g.output(g.one("Cast", [g.input("x", [4])], to=TensorProto.INT4), TensorProto.INT4)
    with pytest.raises(CompileError, match="cast to int4 is not supported"):
        predict_drift(save(g.model(), tmp_path), {"x": np.zeros(4, np.float32)}, precision="fp32")
