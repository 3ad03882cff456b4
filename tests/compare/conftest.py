"""Models for the compare tests, built here: a chain of MatMuls whose length sets its cost."""

from __future__ import annotations

from pathlib import Path

from onnx import helper, numpy_helper

from tests.report.diverging_models import random_weights, save_model


def matmul_chain(path: Path, layers: int, width: int = 192, seed: int = 0) -> Path:
    """x[1, width] through `layers` MatMul+Tanh: the cost grows with `layers`, the signature not."""
    nodes, inits = [], []
    current = "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array(random_weights(width, seed * 1000 + i), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [current, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}"]))
        current = f"t{i}"
    nodes.append(helper.make_node("Identity", [current], ["y"]))
    return save_model(nodes, inits, path, width)
