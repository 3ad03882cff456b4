"""A simulated unit's outputs: what the job's reference check and reports then read.

`reference`: the artifact's own outputs from this host's ONNX Runtime (CPU), computed once per
(artifact, inputs) and node and cached, plus noise far inside the default tolerance, so a
simulated job passes its reference check with a realistic, non-zero error (an fp32 CPU run
differs from the reference in its last bits too). `random`: arrays of the outputs' declared
shapes and types (symbolic dims taken as 1), which fail the check: the failure path at scale.
An artifact ONNX Runtime cannot run falls back to `random`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from ondevice_farm_agents.base import RunRequest
from ondevice_farm_agents.simulated.settings import OutputsMode

log = logging.getLogger(__name__)

#: (artifact, inputs) whose outputs a node keeps: a nightly's models, not an unbounded history
CACHED_OUTPUTS = 256
#: the noise added to a reference output, relative to its scale
RELATIVE_NOISE = 1e-7
#: an output whose shape is not declared
FALLBACK_SHAPE = (1, 1000)


def _inputs_digest(request: RunRequest) -> str:
    digest = hashlib.sha256(request.artifact_sha256.encode())
    for name in sorted(request.inputs):
        value = np.ascontiguousarray(request.inputs[name])
        digest.update(f"{name}:{value.dtype}:{value.shape}".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def _declared(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The graph's outputs with their shapes and dtypes, as the model declares them."""
    import onnx
    from onnx import helper

    graph = onnx.load(str(path), load_external_data=False).graph
    declared: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    for output in graph.output:
        tensor = output.type.tensor_type
        dims = tuple(
            d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tensor.shape.dim
        )
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        except (KeyError, TypeError):
            dtype = np.dtype(np.float32)
        declared[output.name] = (dims or FALLBACK_SHAPE, dtype)
    return declared


def random_outputs(request: RunRequest, rng: np.random.Generator) -> dict[str, np.ndarray]:
    try:
        declared = _declared(request.artifact)
    except Exception:  # not an ONNX file (a .mlpackage), or not on this node
        declared = {}
    if not declared:
        declared = {"output": (FALLBACK_SHAPE, np.dtype(np.float32))}
    out = {}
    for name, (shape, dtype) in declared.items():
        if np.issubdtype(dtype, np.floating):
            out[name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            out[name] = rng.random(shape) < 0.5
        else:
            out[name] = rng.integers(0, 100, size=shape).astype(dtype)
    return out


class OutputSource:
    """Outputs per job; one per agent, shared by its units' threads."""

    def __init__(self, mode: OutputsMode) -> None:
        self.mode = mode
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, dict[str, np.ndarray]] = OrderedDict()

    def _reference(self, request: RunRequest) -> dict[str, np.ndarray] | None:
        key = _inputs_digest(request)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
            try:
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.intra_op_num_threads = 1
                session = ort.InferenceSession(
                    str(request.artifact), options, providers=["CPUExecutionProvider"]
                )
                names = [o.name for o in session.get_outputs()]
                values = session.run(names, dict(request.inputs))
                outputs = {n: np.asarray(v) for n, v in zip(names, values, strict=True)}
            except Exception as exc:  # an artifact this host cannot run: random arrays instead
                log.info("simulated outputs of %s: random (%s)", request.artifact.name, exc)
                return None
            self._cache[key] = outputs
            if len(self._cache) > CACHED_OUTPUTS:
                self._cache.popitem(last=False)
            return outputs

    def outputs(self, request: RunRequest, rng: np.random.Generator) -> dict[str, np.ndarray]:
        if self.mode == "none":
            return {}
        exact = self._reference(request) if self.mode == "reference" else None
        if exact is None:
            return random_outputs(request, rng)
        noisy = {}
        for name, value in exact.items():
            if np.issubdtype(value.dtype, np.floating) and value.size:
                scale = float(np.max(np.abs(value))) or 1.0
                noise = rng.standard_normal(value.shape) * scale * RELATIVE_NOISE
                noisy[name] = (value + noise).astype(value.dtype)
            else:
                noisy[name] = value.copy()
        return noisy
