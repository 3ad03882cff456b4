"""Ingest of a PyTorch source: the checkpoint read, its inputs made, its ONNX export checked.

    checkpoint -> inputs (seeded, or --example-inputs) -> eager outputs (the reference)
               -> torch.onnx.export -> the ONNX model every ONNX target compiles from
               -> the export on ONNX Runtime (CPU, optimisations off) against eager: its own error

The run document records the checkpoint's sha256 and torch version beside the ONNX export's.
Where torch.onnx.export refuses the checkpoint, ingest goes on without ONNX: the converters that
read the checkpoint itself (`Target.needs_checkpoint`) still run, and only the targets built from
the export fail, each with the export's one line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.errors import CompileError, UsageError
from ondevice_farm.inputs import load_npz_inputs, seeded_inputs
from ondevice_farm.model import ModelInfo, TensorSpec, inspect_model
from ondevice_farm.targets import Target
from ondevice_farm.torch_source.checkpoint import TorchCheckpoint, load_checkpoint
from ondevice_farm.torch_source.eager import eager_reference
from ondevice_farm.torch_source.onnx_export import OnnxExport, OnnxExportRefused, export_onnx


@dataclass
class TorchSource:
    checkpoint: TorchCheckpoint
    #: None where torch.onnx.export refused the checkpoint (`refusal` says why)
    export: OnnxExport | None
    #: the ONNX export as the rest of the farm sees it, named after the checkpoint; without an
    #: export, the checkpoint itself (its path and sha256, no opset, no nodes)
    info: ModelInfo
    shapes: dict[str, tuple[int, ...]]
    inputs: dict[str, np.ndarray]
    #: the checkpoint's own outputs, eager fp32 on the host CPU, by export output name
    eager: dict[str, np.ndarray]
    refusal: OnnxExportRefused | None = None

    def require_runnable(self, targets: list[Target]) -> None:
        """Without an ONNX export, a submission none of whose targets converts the checkpoint
        itself has nothing to run: the export's refusal is its error, raised before anything is
        stored."""
        if self.refusal is not None and not any(t.needs_checkpoint for t in targets):
            raise self.refusal

    def onnx_path(self) -> Path:
        """The ONNX export the ONNX-route targets compile; without one, CompileError in one line:
        the export's refusal."""
        if self.export is None:
            reason = self.refusal.reason if self.refusal is not None else "no ONNX export"
            hint = self.refusal.hint if self.refusal is not None else None
            raise CompileError(f"the ONNX export refused: {reason}", hint=hint)
        return self.export.path

    def check_target(self, target: Target) -> None:
        """A target built from the ONNX export (ort/*, coreml/*) fails in one line without one."""
        if not target.needs_checkpoint:
            self.onnx_path()

    def _export_document(self) -> dict[str, Any]:
        if self.export is None:
            refused = self.refusal or OnnxExportRefused("no ONNX export")
            return {"refused": refused.reason, "op": refused.op, "hint": refused.hint}
        return {
            "exporter": self.export.exporter,
            "opset": self.export.opset,
            "fallbacks": list(self.export.fallbacks),
            "sha256": self.info.sha256,
            "path": str(self.export.path),
        }

    def document(self) -> dict[str, Any]:
        """`model.source` of a run document (docs/results.md)."""
        return {
            "kind": "pytorch",
            "format": self.checkpoint.kind,
            "path": str(self.checkpoint.path),
            "sha256": self.checkpoint.sha256,
            "torch_version": self.checkpoint.torch_version,
            "reference": "pytorch eager, fp32, host CPU",
            "onnx_export": self._export_document(),
        }

    def reference_entry(self) -> dict[str, Any]:
        """`reference.model` of a job: the checkpoint computed the reference, not ONNX Runtime."""
        return {
            "name": self.checkpoint.name,
            "sha256": self.checkpoint.sha256,
            "path": str(self.checkpoint.path),
            "source": "submitted checkpoint",
            "runtime": f"pytorch {self.checkpoint.torch_version} eager, fp32, host CPU",
        }


def _checkpoint_info(checkpoint: TorchCheckpoint) -> ModelInfo:
    """The checkpoint's inputs in the shape `ondevice_farm.inputs` reads, seeded like an ONNX model's."""
    return ModelInfo(checkpoint.path, checkpoint.sha256, checkpoint.name, 0, checkpoint.inputs, (), 0, {})


def _without_onnx(checkpoint: TorchCheckpoint, eager: dict[str, np.ndarray]) -> ModelInfo:
    """The checkpoint as the farm's model where there is no ONNX export: its inputs, and outputs
    named and typed as eager computed them."""
    outputs = tuple(
        TensorSpec(name, str(a.dtype), tuple(int(d) for d in a.shape)) for name, a in eager.items()
    )
    return dataclasses.replace(_checkpoint_info(checkpoint), outputs=outputs)


def _example_arrays(path: Path | None) -> dict[str, np.ndarray]:
    if path is None:
        return {}
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError) as exc:
        raise UsageError(f"--example-inputs {path}: not a readable .npz file ({exc})") from None


def _resolve(
    checkpoint: TorchCheckpoint, overrides: dict[str, tuple[int, ...]]
) -> dict[str, tuple[int, ...]]:
    from ondevice_farm.inputs import resolve_shapes

    return resolve_shapes(_checkpoint_info(checkpoint), overrides)


def ingest_torch(
    path: Path,
    *,
    shapes: dict[str, tuple[int, ...]],
    example_inputs: Path | None,
    seed: int,
    export_dir: Path,
    reference_dir: Path,
) -> TorchSource:
    """Read, export and reference a checkpoint; every input error is raised before anything is
    stored. An export torch refuses is kept as `refusal`, not raised: see `require_runnable`."""
    example = _example_arrays(example_inputs)
    checkpoint = load_checkpoint(path, shapes=shapes, example=example)
    resolved = _resolve(checkpoint, shapes)
    info = _checkpoint_info(checkpoint)
    inputs = seeded_inputs(info, resolved, seed)
    if example_inputs is not None:
        inputs = load_npz_inputs(example_inputs, info, inputs)
        resolved = {name: tuple(int(d) for d in array.shape) for name, array in inputs.items()}
    eager = eager_reference(checkpoint, inputs, reference_dir)
    try:
        export = export_onnx(checkpoint, inputs, len(eager), export_dir)
    except OnnxExportRefused as refused:  # the targets that read the checkpoint still can run
        return TorchSource(
            checkpoint, None, _without_onnx(checkpoint, eager), resolved, inputs, eager, refused
        )
    onnx_info = dataclasses.replace(inspect_model(export.path), name=checkpoint.name)
    return TorchSource(checkpoint, export, onnx_info, resolved, inputs, eager)
