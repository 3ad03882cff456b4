"""Small ONNX models whose outputs are the hard cases of a reference check: inf, NaN, all-zero,
near-zero, integer class indices, bool masks, strings; and a small CNN with its int8 QDQ twin
made by ONNX Runtime's own quantiser. Each `--reference` twin has the same inputs and outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
WIDTH = 64


def _save(path: Path, nodes: list[onnx.NodeProto], output: onnx.ValueInfoProto, *inits: np.ndarray) -> Path:
    names = [f"c{i}" for i in range(len(inits))]
    graph = helper.make_graph(
        nodes,
        path.stem,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [output],
        [numpy_helper.from_array(np.asarray(v), name) for v, name in zip(inits, names, strict=True)],
    )
    imports = [helper.make_opsetid("", OPSET), helper.make_opsetid("ai.onnx.ml", 2)]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def _float_out(shape: list[int] | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info("y", TensorProto.FLOAT, shape or [1, WIDTH])


def fp16_overflow(path: Path) -> Path:
    """x * 1e5 through fp16 and back: |x| > 0.655 overflows fp16's 65504 to inf, as an fp16
    backend does; `scaled` is the same in fp32, its float reference."""
    return _save(
        path,
        [
            helper.make_node("Mul", ["x", "c0"], ["big"]),
            helper.make_node("Cast", ["big"], ["half"], to=TensorProto.FLOAT16),
            helper.make_node("Cast", ["half"], ["y"], to=TensorProto.FLOAT),
        ],
        _float_out(),
        np.float32(1e5),
    )


def scaled(path: Path, factor: float = 1e5) -> Path:
    return _save(path, [helper.make_node("Mul", ["x", "c0"], ["y"])], _float_out(), np.float32(factor))


def square_root(path: Path) -> Path:
    """NaN wherever the seeded standard-normal input is negative."""
    return _save(path, [helper.make_node("Sqrt", ["x"], ["y"])], _float_out())


def near_zero(path: Path, offset: float = 0.0) -> Path:
    """A probability map that is almost empty: sigmoid(2x - 18) is 1e-8..1e-6; `offset` adds a
    constant error of that size (what another kernel's rounding gives at this scale)."""
    nodes = [
        helper.make_node("Mul", ["x", "c0"], ["x2"]),
        helper.make_node("Add", ["x2", "c1"], ["z"]),
        helper.make_node("Sigmoid", ["z"], ["p"]),
        helper.make_node("Add", ["p", "c2"], ["y"]),
    ]
    return _save(path, nodes, _float_out(), np.float32(2.0), np.float32(-18.0), np.float32(offset))


def class_index(path: Path, off_by: int = 0) -> Path:
    """The arg-max class (int64), plus `off_by`: 281 against 282 is a different class."""
    nodes = [
        helper.make_node("ArgMax", ["x"], ["idx"], axis=1, keepdims=0),
        helper.make_node("Add", ["idx", "c0"], ["y"]),
    ]
    return _save(path, nodes, helper.make_tensor_value_info("y", TensorProto.INT64, [1]), np.int64(off_by))


def mask(path: Path, threshold: float = 0.0) -> Path:
    return _save(
        path,
        [helper.make_node("Greater", ["x", "c0"], ["y"])],
        helper.make_tensor_value_info("y", TensorProto.BOOL, [1, WIDTH]),
        np.float32(threshold),
    )


def label(path: Path, labels: list[str]) -> Path:
    """The arg-max class's name: a string output (ai.onnx.ml LabelEncoder)."""
    nodes = [
        helper.make_node("ArgMax", ["x"], ["idx"], axis=1, keepdims=0),
        helper.make_node(
            "LabelEncoder",
            ["idx"],
            ["y"],
            domain="ai.onnx.ml",
            keys_int64s=list(range(WIDTH)),
            values_strings=[labels[i % len(labels)] for i in range(WIDTH)],
            default_string="?",
        ),
    ]
    return _save(path, nodes, helper.make_tensor_value_info("y", TensorProto.STRING, [1]))


def small_cnn(path: Path, seed: int = 0) -> Path:
    """Conv-Relu-Conv-Relu-GlobalAveragePool-Flatten-Gemm: a 10-class image classifier on 3x32x32."""
    rng = np.random.default_rng(seed)

    def weights(*shape: int) -> np.ndarray:
        fan_in = int(np.prod(shape[1:]))
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    inits = {
        "w1": weights(16, 3, 3, 3),
        "b1": np.zeros(16, np.float32),
        "w2": weights(32, 16, 3, 3),
        "b2": np.zeros(32, np.float32),
        "w3": weights(10, 32).astype(np.float32),
        "b3": np.zeros(10, np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "small_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def quantized(float_model: Path, path: Path, samples: int = 16) -> Path:
    """ONNX Runtime's static int8 quantisation (QDQ format), calibrated on seeded images."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Images(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(1)
            self.batches = iter(
                [{"image": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(samples)]
            )

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.batches, None)

    quantize_static(
        str(float_model),
        str(path),
        Images(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
    )
    return path
