"""CoreML's entries in the runtime registry: the ONNX route (the farm's lowering, `compile/`)
and the `torch` route (coremltools' PyTorch frontend on the checkpoint)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.compile.request import CompileRequest
from ondevice_farm.compile.stored import store_built
from ondevice_farm.errors import UsageError, install_hint


def compile_target(request: CompileRequest, store: ArtifactStore) -> CompiledArtifact:
    target = request.target
    try:
        from ondevice_farm.runtimes.coreml.compile import compile_coreml
    except ImportError as exc:
        raise UsageError(f"{target} needs coremltools ({exc})", hint=install_hint("coreml")) from None
    with tempfile.TemporaryDirectory(prefix="farm-coreml-") as tmp:
        built = compile_coreml(
            request.model_path,
            target,
            Path(tmp),
            precision=request.precision,
            input_shapes=request.input_shapes or None,
            quantization=request.quantization,
            fixed_inputs=request.fixed_inputs,
        )
        return store_built(built, store)


def compile_torch_target(request: CompileRequest, store: ArtifactStore) -> CompiledArtifact:
    target = request.target
    if request.checkpoint is None:
        raise UsageError(
            f"{target} converts a PyTorch checkpoint with coremltools' own frontend; the model is not one",
            hint="pass the .pt2/.pt checkpoint, or use the ONNX route's coreml/* targets",
        )
    try:
        from ondevice_farm.runtimes.coreml.compile.torch_route import compile_coreml_torch
    except ImportError as exc:
        raise UsageError(
            f"{target} needs coremltools ({exc})", hint="pip install 'ondevice-farm[coreml]'"
        ) from None
    with tempfile.TemporaryDirectory(prefix="farm-coreml-torch-") as tmp:
        built = compile_coreml_torch(
            request.checkpoint, target, Path(tmp), request.input_shapes, precision=request.precision
        )
        return store_built(built, store)
