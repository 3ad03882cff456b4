"""A model that branches on a scalar input, as a voice-activity model branches on its sample
rate: what `--fix sr=16000` pins (tests/core/test_submit_fix.py, test_submit_host.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

WIDTH = 16
#: a fed `x`: the branch taken shows in the output
X = np.linspace(-2.0, 3.0, WIDTH, dtype=np.float32).reshape(1, WIDTH)


def _branch(name: str, factor: float) -> onnx.GraphProto:
    """x * factor, x read from the outer scope. The factor is a vector: a CoreML package whose
    weights folder is empty does not reach the iOS stand-in whole (only files are pushed)."""
    return helper.make_graph(
        [helper.make_node("Mul", ["x", f"{name}_factor"], [f"{name}_out"])],
        name,
        [],
        [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [1, WIDTH])],
        [onnx.numpy_helper.from_array(np.full(WIDTH, factor, np.float32), f"{name}_factor")],
    )


def sample_rate_branch(path: Path) -> Path:
    """y = x * 2 when the scalar int64 `sr` is 16000, x * 3 otherwise."""
    graph = helper.make_graph(
        [
            helper.make_node("Equal", ["sr", "rate"], ["is_16k"]),
            helper.make_node(
                "If", ["is_16k"], ["y"], then_branch=_branch("then", 2.0), else_branch=_branch("else", 3.0)
            ),
        ],
        "sample_rate_branch",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WIDTH])],
        [onnx.numpy_helper.from_array(np.array(16000, np.int64), "rate")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path
