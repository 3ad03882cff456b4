"""Small models with a dynamic input `x[batch, sequence]` (or static dims in its place), for the
note a failure gives on dims no --shape pinned (tests/core/test_dynamic_dims.py,
tests/coreml/test_dynamic_dims_coreml.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

DYNAMIC: tuple[str | int, ...] = ("batch", "sequence")
#: a sequence long enough for `frames`' window
LONG = 16


def _save(graph: onnx.GraphProto, path: Path, *domains: str) -> Path:
    opsets = [helper.make_opsetid("", 17), *(helper.make_opsetid(d, 1) for d in domains)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def frames(path: Path, shape: tuple[str | int, ...] = DYNAMIC) -> Path:
    """y = a Conv of window 4, stride 2 over x seen as [batch, 1, sequence] (an STFT's framing):
    at the farm's default size for a dynamic dim, 1, there is no window to take."""
    graph = helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["x", "channel"], ["x3"]),
            helper.make_node("Conv", ["x3", "window"], ["y"], name="frames", kernel_shape=[4], strides=[2]),
        ],
        "frames",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [shape[0], 1, "count"])],
        [
            onnx.numpy_helper.from_array(np.ones((1, 1, 4), np.float32), "window"),
            onnx.numpy_helper.from_array(np.array([1], np.int64), "channel"),
        ],
    )
    return _save(graph, path)


def unknown_op(path: Path, shape: tuple[str | int, ...] = DYNAMIC) -> Path:
    """y = an op of a domain no runtime registers: ONNX Runtime refuses to load it, whatever the
    shapes (a compile refusal to provoke on ort/cpu)."""
    graph = helper.make_graph(
        [helper.make_node("Unknown", ["x"], ["y"], domain="farm.test")],
        "unknown_op",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
    )
    return _save(graph, path, "farm.test")


def relu(path: Path, shape: tuple[str | int, ...] = DYNAMIC) -> Path:
    """y = relu(x): runs at any size, so only a job can fail."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
    )
    return _save(graph, path)
