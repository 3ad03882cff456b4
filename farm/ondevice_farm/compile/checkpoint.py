"""Compiling a PyTorch checkpoint itself (no ONNX): what the runtimes that read it share.

The artifact is built in a scratch folder by the runtime's converter, then stored with its
sidecars (`stored.py`); the I/O name map says which of the artifact's inputs and outputs is which
of the checkpoint's, outputs named like the eager reference (`output`, `output_0`, ...).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.cached import compiled_once
from ondevice_farm.compile.io_names import Feature, IoNameMap
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.compile.request import CompileRequest
from ondevice_farm.compile.stored import store_built
from ondevice_farm.errors import UsageError
from ondevice_farm.targets import Target
from ondevice_farm.torch_source.checkpoint import TorchCheckpoint

#: (checkpoint, target, scratch folder, input shapes) -> the artifact in the scratch folder
CheckpointConverter = Callable[[TorchCheckpoint, Target, Path, dict[str, tuple[int, ...]]], CompiledArtifact]


def io_name_map(
    checkpoint: TorchCheckpoint,
    shapes: dict[str, tuple[int, ...]],
    input_features: list[str],
    outputs: list[tuple[str, str, tuple[int, ...]]],
) -> IoNameMap:
    """Inputs: the checkpoint's names in argument order against the artifact's (`input_features`);
    `outputs`: (the artifact's name, dtype, shape) in the model's order, mapped to `output`,
    `output_0`, ... as the eager reference names them."""
    from ondevice_farm.torch_source.onnx_export import output_names

    inputs = tuple(
        Feature(spec.name, feature, spec.dtype, tuple(shapes[spec.name]))
        for spec, feature in zip(checkpoint.inputs, input_features, strict=True)
    )
    outs = tuple(
        Feature(name, feature, dtype, shape)
        for name, (feature, dtype, shape) in zip(output_names(len(outputs)), outputs, strict=True)
    )
    return IoNameMap(inputs, outs)


def compile_checkpoint(
    request: CompileRequest,
    store: ArtifactStore,
    convert: CheckpointConverter,
    identity: str | None = None,
) -> CompiledArtifact:
    """`convert` on the request's checkpoint in a scratch folder, the result stored with the
    sidecars the runtime's spec names. With `identity` (the converter's versions), a compile done
    before for the same checkpoint, target, shapes and settings is reused (compile/cached.py)."""
    target = request.target
    source = request.checkpoint
    if source is None:
        raise UsageError(
            f"{target} compiles a PyTorch checkpoint; the model is not one",
            hint="pass the .pt2 (torch.export.save) or TorchScript .pt the model came from",
        )
    shapes = request.input_shapes or {spec.name: tuple(int(d) for d in spec.shape) for spec in source.inputs}

    def build() -> CompiledArtifact:
        with tempfile.TemporaryDirectory(prefix=f"farm-{target.runtime}-") as tmp:
            built = convert(source, target, Path(tmp), shapes)
            return store_built(built, store, target.spec.sidecar_suffixes)

    if identity is None:
        return build()
    return compiled_once(
        request,
        store,
        identity=identity,
        artifact_name=target.spec.artifact_name,
        sidecar_suffixes=target.spec.sidecar_suffixes,
        build=build,
    )
