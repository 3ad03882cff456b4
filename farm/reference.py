"""The host reference: the source model on ONNX Runtime's CPU provider, optimisations off, fp32.

Every device's outputs are compared against these, computed once per (model, inputs).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np

from farm.errors import ModelError


def inputs_digest(inputs: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in sorted(inputs):
        array = np.ascontiguousarray(inputs[name])
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _run_reference(model_path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        values = session.run(names, inputs)
    except Exception as exc:
        raise ModelError(f"{model_path}: the reference run failed: {str(exc).splitlines()[0]}") from None
    return {name: np.asarray(value) for name, value in zip(names, values, strict=True)}


def reference_outputs(
    model_path: Path, model_sha256: str, inputs: dict[str, np.ndarray], cache_dir: Path
) -> dict[str, np.ndarray]:
    cached = cache_dir / f"{model_sha256}-{inputs_digest(inputs)[:32]}.npz"
    if cached.exists():
        with np.load(cached, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    outputs = _run_reference(model_path, inputs)
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir, suffix=".npz")
    with os.fdopen(fd, "wb") as handle:
        np.savez(handle, **outputs)  # type: ignore[arg-type]
    os.replace(tmp, cached)
    return outputs
