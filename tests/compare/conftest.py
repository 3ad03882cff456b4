"""Models for the compare tests, built here: a chain of MatMuls whose length sets its cost."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def matmul_chain(path: Path, layers: int, width: int = 192, seed: int = 0) -> Path:
    """x[1, width] through `layers` MatMul+Tanh: the cost grows with `layers`, the signature not."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    current = "x"
    for i in range(layers):
        weight = numpy_helper.from_array(
            (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32), f"w{i}"
        )
        inits.append(weight)
        nodes.append(helper.make_node("MatMul", [current, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}"]))
        current = f"t{i}"
    nodes.append(helper.make_node("Identity", [current], ["y"]))
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path
