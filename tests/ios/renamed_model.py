"""A model named as PyTorch's exporter names tensors: `input.1`, `onnx::Conv_3`, `495`, `out:0`,
and names that are equal once CoreML has sanitised them (`input.1` and `input_1`; `out:0` and
`out_0`). The iOS tests and the two-node fleet test run it as a CoreML job."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

#: ONNX name -> the feature name CoreML gives it (what the I/O name map must say)
EXPECTED_INPUTS = {"input.1": "input_1", "input_1": "input_1_1"}
#: (`out_0` gets some `out_0_<n>`: which n depends on the lowering's intermediate names)
EXPECTED_OUTPUTS = {"495": "t_495", "out:0": "out_0", "out_0": "out_0_*"}


def write_renamed_model(path: Path) -> Path:
    rng = np.random.default_rng(3)
    weight = (rng.standard_normal((4, 2, 3, 3)) * 0.3).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["input.1", "onnx::Conv_3"], ["495"], name="/conv/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["495"], ["onnx::Add_7"], name="/relu/Relu"),
        helper.make_node("Add", ["onnx::Add_7", "input_1"], ["out:0"], name="/add/Add"),
        helper.make_node("Sigmoid", ["out:0"], ["out_0"], name="/sigmoid/Sigmoid"),
    ]
    graph = helper.make_graph(
        nodes,
        "torch_named",
        [
            helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 2, 6, 6]),
            helper.make_tensor_value_info("input_1", TensorProto.FLOAT, [1, 4, 6, 6]),
        ],
        [
            helper.make_tensor_value_info("495", TensorProto.FLOAT, [1, 4, 6, 6]),
            helper.make_tensor_value_info("out:0", TensorProto.FLOAT, [1, 4, 6, 6]),
            helper.make_tensor_value_info("out_0", TensorProto.FLOAT, [1, 4, 6, 6]),
        ],
        [helper.make_tensor("onnx::Conv_3", TensorProto.FLOAT, weight.shape, weight.ravel())],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def renamed_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {
        "input.1": rng.standard_normal((1, 2, 6, 6)).astype(np.float32),
        "input_1": rng.standard_normal((1, 4, 6, 6)).astype(np.float32),
    }
