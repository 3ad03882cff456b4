"""Running one ONNX model through the CoreML path and ONNX Runtime side by side."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from ondevice_farm.runtimes.coreml.compile import predict_drift

#: the MIL program in fp32 must match ONNX Runtime within this, relative to the output's scale
FP32_RELATIVE_TOLERANCE = 1e-4


def random_feeds(
    model: onnx.ModelProto, *, batch: int = 1, positive: bool = False, seed: int = 0
) -> dict[str, np.ndarray]:
    """Float inputs from N(0,1) (or |N(0,1)|+0.1), free dims set to `batch`."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else batch for d in vi.type.tensor_type.shape.dim]
        value = rng.standard_normal(dims).astype(np.float32)
        feeds[vi.name] = np.abs(value) + 0.1 if positive else value
    return feeds


def save(model: onnx.ModelProto, tmp_path: Path, name: str = "model.onnx") -> Path:
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def ort_outputs(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))


def relative_error(reference: np.ndarray, actual: np.ndarray) -> float:
    assert reference.shape == actual.shape, f"shape {actual.shape} != reference {reference.shape}"
    scale = float(np.max(np.abs(reference))) if reference.size else 1.0
    return (
        float(np.max(np.abs(actual.astype(np.float64) - reference))) / max(scale, 1e-6)
        if reference.size
        else 0.0
    )


def assert_fp32_matches(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The fp32 MIL program gives ONNX Runtime's outputs; returns the reference."""
    reference = ort_outputs(path, feeds)
    predicted = predict_drift(path, feeds, precision="fp32")
    assert set(predicted) == set(reference)
    for name, ref in reference.items():
        error = relative_error(ref, predicted[name])
        assert error <= FP32_RELATIVE_TOLERANCE, f"{name}: relative error {error:.2e}"
    return reference
