"""The host reference: the source model on ONNX Runtime's CPU provider, optimisations off, fp32.

Every device's outputs are compared against these, computed once per (model, inputs).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.errors import ModelError, UsageError
from ondevice_farm.model import ModelInfo


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
    return {name: _storable(np.asarray(value)) for name, value in zip(names, values, strict=True)}


def _storable(array: np.ndarray) -> np.ndarray:
    """ONNX Runtime returns string tensors as Python objects; the cache holds no pickles, so as
    fixed-width unicode."""
    return array.astype(str) if array.dtype.kind == "O" else array


def reference_outputs(
    model_path: Path, model_sha256: str, inputs: dict[str, np.ndarray], cache_dir: Path
) -> dict[str, np.ndarray]:
    cached = cache_dir / f"{model_sha256}-{inputs_digest(inputs)[:32]}.npz"
    return cached_outputs(cached, lambda: _run_reference(model_path, inputs))


def cached_outputs(cached: Path, compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """`compute()`'s outputs, kept in `cached` (.npz, read without pickles, written whole through a
    rename) so that the next call with the same model and inputs reads them instead."""
    if cached.exists():
        with np.load(cached, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    outputs = compute()
    cached.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cached.parent, suffix=".npz")
    with os.fdopen(fd, "wb") as handle:
        np.savez(handle, **outputs)  # type: ignore[arg-type]
    os.replace(tmp, cached)
    return outputs


def check_reference_model(model: ModelInfo, reference: ModelInfo) -> None:
    """`--reference MODEL` must take the same inputs and give (at least) the same outputs, by
    name and kind, so the same seeded inputs feed both and each output has its counterpart."""
    theirs = {t.name: t for t in reference.inputs}
    ours = {t.name for t in model.inputs}
    for spec in model.inputs:
        other = theirs.get(spec.name)
        if other is None:
            raise UsageError(f"--reference {reference.path}: it has no input {spec.name!r}")
        if other.dtype != spec.dtype:
            raise UsageError(
                f"--reference {reference.path}: input {spec.name!r} is {other.dtype}, "
                f"the model's is {spec.dtype}"
            )
    extra = [name for name in theirs if name not in ours]
    if extra:
        raise UsageError(f"--reference {reference.path}: it needs inputs the model lacks: {', '.join(extra)}")
    outputs = {t.name for t in reference.outputs}
    lacking = [t.name for t in model.outputs if t.name not in outputs]
    if lacking:
        raise UsageError(f"--reference {reference.path}: it has no output {', '.join(map(repr, lacking))}")


def reference_model_entry(model: ModelInfo, given: bool) -> dict[str, Any]:
    """What the job document records about the model that computed the reference outputs."""
    return {
        "name": model.name,
        "sha256": model.sha256,
        "path": str(model.path),
        "source": "--reference" if given else "submitted model",
        "runtime": "onnxruntime CPUExecutionProvider, optimisations off",
    }
