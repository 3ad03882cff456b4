"""Compile one model for one target. ONNX Runtime here; CoreML in `ondevice_farm.compile.coreml`.

`coreml-torch/*`, `executorch/*` and `litert/*` targets compile the PyTorch checkpoint itself
(`source`), not its ONNX export (`ondevice_farm.compile.edge` for the last two).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.io_names import save_io_names
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.errors import UsageError, install_hint
from ondevice_farm.targets import CHECKPOINT_RUNTIMES, Target

if TYPE_CHECKING:
    from ondevice_farm.torch_source.checkpoint import TorchCheckpoint


@dataclass(frozen=True)
class OrtCompileCache:
    directory: Path
    #: the source model's sha256, the cache's key with the target and the ORT build
    source_sha256: str


def compile_for_target(
    model_path: Path,
    target: Target,
    store: ArtifactStore,
    *,
    input_shapes: dict[str, tuple[int, ...]] | None = None,
    coreml_precision: str = "fp16",
    source: TorchCheckpoint | None = None,
    coreml_quantization: str = "keep",
    cache: OrtCompileCache | None = None,
    coreml_fixed_inputs: dict[str, float] | None = None,
) -> CompiledArtifact:
    """`cache`: where ONNX Runtime compiles are kept by the source's hash (a model compiled before
    costs no ORT pass and no onnx import); None compiles every time."""
    if target.route == "torch":
        return _compile_torch_route(target, store, source, input_shapes or {}, coreml_precision)
    if target.runtime in CHECKPOINT_RUNTIMES:
        from ondevice_farm.compile.edge import compile_edge

        return compile_edge(target, store, source, input_shapes or {})
    if target.runtime == "ort":
        if cache is not None:
            from ondevice_farm.compile.cache import compile_ort_cached

            return compile_ort_cached(model_path, cache.source_sha256, target, store, cache.directory)
        from ondevice_farm.compile.ort import compile_ort

        return compile_ort(model_path, target, store)
    if target.runtime == "coreml":
        try:
            from ondevice_farm.compile.coreml import compile_coreml
        except ImportError as exc:
            raise UsageError(f"{target} needs coremltools ({exc})", hint=install_hint("coreml")) from None
        with tempfile.TemporaryDirectory(prefix="farm-coreml-") as tmp:
            built = compile_coreml(
                model_path,
                target,
                Path(tmp),
                precision=coreml_precision,
                input_shapes=input_shapes,
                quantization=coreml_quantization,
                fixed_inputs=coreml_fixed_inputs,
            )
            sha, path = store.put(built.path, built.path.name)
        if built.io_names is not None:  # stored with the artifact, under the same content hash
            save_io_names(built.io_names, path)
        return CompiledArtifact(
            target=target, path=path, sha256=sha, report=built.report, io_names=built.io_names
        )
    raise UsageError(f"no compiler for runtime {target.runtime!r}")


def _compile_torch_route(
    target: Target,
    store: ArtifactStore,
    source: TorchCheckpoint | None,
    input_shapes: dict[str, tuple[int, ...]],
    precision: str,
) -> CompiledArtifact:
    if source is None:
        raise UsageError(
            f"{target} converts a PyTorch checkpoint with coremltools' own frontend; the model is not one",
            hint="pass the .pt2/.pt checkpoint, or use the ONNX route's coreml/* targets",
        )
    try:
        from ondevice_farm.compile.coreml.torch_route import compile_coreml_torch
    except ImportError as exc:
        raise UsageError(
            f"{target} needs coremltools ({exc})", hint="pip install 'ondevice-farm[coreml]'"
        ) from None
    with tempfile.TemporaryDirectory(prefix="farm-coreml-torch-") as tmp:
        built = compile_coreml_torch(source, target, Path(tmp), input_shapes, precision=precision)
        sha, path = store.put(built.path, built.path.name)
    return CompiledArtifact(target=target, path=path, sha256=sha, report=built.report)
