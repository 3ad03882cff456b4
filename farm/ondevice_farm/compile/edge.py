"""ExecuTorch and LiteRT targets: compiled from the PyTorch checkpoint, kept in the artifact store.

The artifact (`model.pte`, `model.tflite`) goes into the store under its sha256; beside it the I/O
name map (the checkpoint's input names in argument order, outputs named like the eager reference)
and, for ExecuTorch, the ETRecord the host runner's Inspector reads.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.io_names import Feature, IoNameMap, save_io_names
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.errors import UsageError
from ondevice_farm.targets import Target

if TYPE_CHECKING:
    from ondevice_farm.torch_source.checkpoint import TorchCheckpoint


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


def compile_edge(
    target: Target,
    store: ArtifactStore,
    source: TorchCheckpoint | None,
    input_shapes: dict[str, tuple[int, ...]],
) -> CompiledArtifact:
    if source is None:
        raise UsageError(
            f"{target} compiles a PyTorch checkpoint; the model is not one",
            hint="pass the .pt2 (torch.export.save) or TorchScript .pt the model came from",
        )
    shapes = input_shapes or {spec.name: tuple(int(d) for d in spec.shape) for spec in source.inputs}
    with tempfile.TemporaryDirectory(prefix=f"farm-{target.runtime}-") as tmp:
        if target.runtime == "executorch":
            from ondevice_farm.compile.executorch import compile_executorch, etrecord_path

            built = compile_executorch(source, target, Path(tmp), shapes)
            sidecars = [etrecord_path(built.path)]
        else:
            from ondevice_farm.compile.litert import compile_litert

            built = compile_litert(source, target, Path(tmp), shapes)
            sidecars = []
        sha, path = store.put(built.path, built.path.name)
        for sidecar in sidecars:
            if sidecar.exists():  # beside the stored artifact, under the same content hash
                shutil.copyfile(
                    sidecar, path.with_name(path.name + sidecar.name.removeprefix(built.path.name))
                )
    if built.io_names is not None:
        save_io_names(built.io_names, path)
    return CompiledArtifact(
        target=target, path=path, sha256=sha, report=built.report, io_names=built.io_names
    )
