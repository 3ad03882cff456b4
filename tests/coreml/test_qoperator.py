"""ONNX's QOperator format (QLinearConv, QLinearMatMul) and DynamicQuantizeLinear on CoreML.

A QOperator model made by ONNX Runtime's own static quantizer lowers to the program its QDQ form
lowers through the rewrite to DequantizeLinear -> op -> QuantizeLinear (what the spec defines),
keeps its weights 8-bit and its activations in MIL's quantize/dequantize, and gives ONNX Runtime's
int8 result up to its requantization steps.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from ondevice_farm.runtimes.coreml.compile import compile_coreml, predict_drift
from ondevice_farm.targets import Target
from tests.coreml.harness import ort_outputs, save
from tests.coreml.onnx_models import Graph, resnet_blocks
from tests.coreml.quantized_models import _Calibration, feeds

pytest.importorskip("coremltools")


def _quantized(tmp_path: Path, fmt: str) -> Path:
    """resnet_blocks quantized by ONNX Runtime: Conv (and the classifier's MatMul) only, so every
    other op stays float and no com.microsoft QLinear op appears."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    model = resnet_blocks()
    float_path = save(model, tmp_path, "float.onnx")
    out = tmp_path / f"{fmt}.onnx"
    logging.getLogger().setLevel(logging.ERROR)
    quantize_static(
        str(float_path),
        str(out),
        _Calibration(model),  # type: ignore[arg-type]
        quant_format=QuantFormat.QOperator if fmt == "qoperator" else QuantFormat.QDQ,
        op_types_to_quantize=["Conv", "MatMul"],
        per_channel=True,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
    )
    return out


@pytest.fixture(scope="module")
def qoperator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _quantized(tmp_path_factory.mktemp("qoperator"), "qoperator")


def test_the_model_holds_qlinear_ops(qoperator: Path) -> None:
    ops = {node.op_type for node in onnx.load(str(qoperator)).graph.node}
    assert "QLinearConv" in ops and "QDQ" not in ops


def test_qoperator_matches_onnx_runtime_int8(qoperator: Path) -> None:
    inputs = feeds(onnx.load(str(qoperator)), seed=7)
    expected = next(iter(ort_outputs(qoperator, inputs).values()))
    ours = next(iter(predict_drift(qoperator, inputs, precision="fp32").values()))
    # ORT's QLinearConv kernels requantize in fixed point: a value may land one step away, which
    # the following layers carry (0.4-0.6 % of the logits' range here; the QDQ form of the same
    # model, run node by node by ORT, is met to 1e-7)
    error = float(np.max(np.abs(ours - expected))) / float(np.max(np.abs(expected)))
    assert error < 0.02, f"relative error {error:.3g}"


def test_qoperator_keeps_8bit_weights_and_quantized_activations(qoperator: Path, tmp_path: Path) -> None:
    artifact = compile_coreml(qoperator, Target.parse("coreml/ane"), tmp_path / "out")
    ops = artifact.report.extra["mil_ops_after_passes"]["op_types"]
    assert ops.get("constexpr_affine_dequantize", 0) >= 5, ops
    assert ops.get("quantize", 0) >= 1 and ops.get("dequantize", 0) >= 1, ops


def test_dynamic_quantize_linear_matches_onnx_runtime(tmp_path: Path) -> None:
    g = Graph(opset=11)
    outputs = g.op("DynamicQuantizeLinear", [g.input("x", [3, 7])], n_out=3)
    for name, dtype in zip(outputs, (TensorProto.UINT8, TensorProto.FLOAT, TensorProto.UINT8), strict=True):
        g.output(name, dtype)
    path = save(g.model(), tmp_path)
    for x in (np.linspace(-1.3, 4.1, 21, dtype=np.float32).reshape(3, 7), np.zeros((3, 7), np.float32)):
        expected = list(ort_outputs(path, {"x": x}).values())
        ours = list(predict_drift(path, {"x": x}, precision="fp32").values())
        np.testing.assert_array_equal(ours[0], expected[0])
        np.testing.assert_allclose(ours[1], expected[1], rtol=1e-6)
        np.testing.assert_array_equal(ours[2], expected[2])


def test_unsupported_ops_takes_the_qlinear_ops(qoperator: Path) -> None:
    from ondevice_farm.runtimes.coreml.compile import unsupported_ops

    assert unsupported_ops(qoperator) == []
