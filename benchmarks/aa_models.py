"""Two more small real architectures for the A/A benchmark, built with onnx's helpers.

`tiny_transformer_ffn.onnx`: a pre-norm transformer feed-forward block (LayerNormalization,
MatMul 256->1024, GELU as Erf, MatMul 1024->256, residual Add) over 32 tokens.
`tiny_lstm.onnx`: a one-layer LSTM (hidden 128) over 50 steps of 64 features, then a Gemm head,
the shape of a small keyword-spotting or sequence-tagging model. Seeded random weights.

    python benchmarks/aa_models.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
SEED = 20261201


def _init(name: str, value: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(value.astype(np.float32), name)


def transformer_ffn(rng: np.random.Generator) -> onnx.ModelProto:
    d, hidden, tokens = 256, 1024, 32
    inits = [
        _init("ln_scale", np.ones(d)),
        _init("ln_bias", np.zeros(d)),
        _init("w1", rng.normal(0, d**-0.5, (d, hidden))),
        _init("b1", np.zeros(hidden)),
        _init("w2", rng.normal(0, hidden**-0.5, (hidden, d))),
        _init("b2", np.zeros(d)),
        _init("sqrt2", np.array(2**0.5)),
        _init("one", np.array(1.0)),
        _init("half", np.array(0.5)),
    ]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "ln_scale", "ln_bias"], ["n"], axis=-1),
        helper.make_node("MatMul", ["n", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h"]),
        helper.make_node("Div", ["h", "sqrt2"], ["hs"]),
        helper.make_node("Erf", ["hs"], ["he"]),
        helper.make_node("Add", ["he", "one"], ["he1"]),
        helper.make_node("Mul", ["h", "he1"], ["hm"]),
        helper.make_node("Mul", ["hm", "half"], ["g"]),
        helper.make_node("MatMul", ["g", "w2"], ["o0"]),
        helper.make_node("Add", ["o0", "b2"], ["o1"]),
        helper.make_node("Add", ["o1", "x"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_transformer_ffn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, tokens, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, tokens, d])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def lstm(rng: np.random.Generator) -> onnx.ModelProto:
    steps, features, hidden, classes = 50, 64, 128, 12
    inits = [
        _init("W", rng.normal(0, features**-0.5, (1, 4 * hidden, features))),
        _init("R", rng.normal(0, hidden**-0.5, (1, 4 * hidden, hidden))),
        _init("B", np.zeros((1, 8 * hidden))),
        _init("head_w", rng.normal(0, hidden**-0.5, (hidden, classes))),
        _init("head_b", np.zeros(classes)),
    ]
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R", "B"], ["", "h_last"], hidden_size=hidden),
        helper.make_node("Squeeze", ["h_last", "axes"], ["h"]),
        helper.make_node("Gemm", ["h", "head_w", "head_b"], ["y"]),
    ]
    inits.append(numpy_helper.from_array(np.array([0], dtype=np.int64), "axes"))
    graph = helper.make_graph(
        nodes,
        "tiny_lstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, 1, features])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, classes])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def build(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    paths = []
    for name, make in (("tiny_transformer_ffn", transformer_ffn), ("tiny_lstm", lstm)):
        model = make(rng)
        onnx.checker.check_model(model, full_check=True)
        path = out_dir / f"{name}.onnx"
        onnx.save(model, path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in build(Path(sys.argv[1] if len(sys.argv) > 1 else ".")):
        print(p)
