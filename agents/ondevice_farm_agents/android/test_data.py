"""Inputs in ONNX's test-data layout (`test_data_set_0/input_<i>.pb`), for onnxruntime_perf_test."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_test_data(inputs: dict[str, np.ndarray], directory: Path) -> list[Path]:
    """One TensorProto per input, named for the graph input, in the order given. Returns the files."""
    from onnx import numpy_helper

    data_set = directory / "test_data_set_0"
    data_set.mkdir(parents=True, exist_ok=True)
    files = []
    for index, (name, array) in enumerate(inputs.items()):
        path = data_set / f"input_{index}.pb"
        path.write_bytes(numpy_helper.from_array(np.ascontiguousarray(array), name=name).SerializeToString())
        files.append(path)
    return files
