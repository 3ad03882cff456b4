"""Small models built to leave fp16 at a known node, and one that stays inside it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: the node where fp16 storage overflows in `overflowing_model`
PLANTED_NODE = "square_overflows_fp16"


def save_model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], path: Path, width: int) -> Path:
    graph = helper.make_graph(
        nodes,
        "diverging",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def random_weights(width: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)


def overflowing_model(path: Path, width: int = 16) -> Path:
    """MatMul -> Relu -> x1000 -> square (1e6: past fp16's 65504) -> x1e-6 -> MatMul -> Tanh."""
    inits = [
        numpy_helper.from_array(random_weights(width, 1), "w1"),
        numpy_helper.from_array(random_weights(width, 2), "w2"),
        numpy_helper.from_array(np.array(1000.0, np.float32), "k_up"),
        numpy_helper.from_array(np.array(1e-6, np.float32), "k_down"),
        numpy_helper.from_array(np.full((width,), 0.5, np.float32), "bias"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="fc1"),
        helper.make_node("Add", ["h1", "bias"], ["h2"], name="fc1_bias"),
        helper.make_node("Relu", ["h2"], ["h3"], name="relu1"),
        helper.make_node("Mul", ["h3", "k_up"], ["h4"], name="scale_up"),
        helper.make_node("Mul", ["h4", "h4"], ["h5"], name=PLANTED_NODE),
        helper.make_node("Mul", ["h5", "k_down"], ["h6"], name="scale_down"),
        helper.make_node("MatMul", ["h6", "w2"], ["h7"], name="fc2"),
        helper.make_node("Tanh", ["h7"], ["y"], name="squash"),
    ]
    return save_model(nodes, inits, path, width)


def steady_model(path: Path, width: int = 16, depth: int = 6) -> Path:
    """A plain MLP whose activations stay O(1): fp16 keeps it around 60 dB throughout."""
    inits, nodes, previous = [], [], "x"
    for i in range(depth):
        inits.append(numpy_helper.from_array(random_weights(width, 10 + i), f"w{i}"))
        out = "y" if i == depth - 1 else f"a{i}"
        nodes.append(helper.make_node("MatMul", [previous, f"w{i}"], [f"m{i}"], name=f"fc{i}"))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [out], name=f"act{i}"))
        previous = out
    return save_model(nodes, inits, path, width)
