"""A submission checked: the checks run before anything is compiled or stored (`prepare`, from a
`SubmitRequest` to a `Prepared`, both in submit_request.py), the run's document and each job's
tolerance. A generation job's own checks are generation.py's."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ondevice_farm.analysis.tolerance import Tolerance, ToleranceOverrides, default_tolerance
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.config import FarmHome
from ondevice_farm.controller.generation import prepare_generation
from ondevice_farm.controller.selection import DeviceSelector, check_targets, parse_devices, targets_for
from ondevice_farm.controller.submit_request import Prepared, SubmitRequest
from ondevice_farm.errors import UsageError
from ondevice_farm.generate.folder import is_genai_folder
from ondevice_farm.inputs import load_npz_inputs, resolve_shapes, seeded_inputs
from ondevice_farm.model import ModelInfo
from ondevice_farm.model_cache import inspect_model_cached
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.reference import check_reference_model
from ondevice_farm.targets import Target
from ondevice_farm.torch_source.checkpoint import is_torch_checkpoint

if TYPE_CHECKING:
    from ondevice_farm.torch_source.ingest import TorchSource


def _ingest_torch(request: SubmitRequest) -> TorchSource:
    from ondevice_farm.torch_source.ingest import ingest_torch

    cache = request.torch_cache or Path(tempfile.gettempdir()) / "farm-torch"
    return ingest_torch(
        request.model_path,
        shapes=request.shapes,
        example_inputs=request.inputs_npz,
        seed=request.seed,
        export_dir=cache / "exports",
        reference_dir=cache / "references",
    )


def with_home_caches(request: SubmitRequest, home: FarmHome) -> SubmitRequest:
    """The farm directory's caches where the request names none: a model (or checkpoint) seen
    before is not read, inspected or exported again."""
    return dataclasses.replace(
        request,
        torch_cache=request.torch_cache or home.torch,
        model_cache=request.model_cache or home.models,
    )


def _onnx_plan(
    request: SubmitRequest, plan: list[tuple[DeviceSelector, Target]]
) -> list[tuple[DeviceSelector, Target]]:
    """An ONNX model's jobs: a target whose converter reads a PyTorch checkpoint
    (Target.needs_checkpoint) is a usage error when asked for, and left out of a profile's own list."""
    asked = [t for t in request.targets or [] if t.needs_checkpoint]
    if asked:
        raise UsageError(
            f"{asked[0]} compiles a PyTorch checkpoint; {request.model_path.name} is not one",
            hint="pass the .pt2 (torch.export.save) or TorchScript .pt the model came from",
        )
    return [(s, t) for s, t in plan if not t.needs_checkpoint]


def prepare(
    request: SubmitRequest,
    profiles: dict[str, DeviceProfile],
    attached: Mapping[str, Sequence[str]] | None = None,
) -> Prepared:
    """`attached`: profile -> serials of its units up, for `--devices all` and `pixel8:*`."""
    if request.runs < 1:
        raise UsageError("--runs must be at least 1")
    if request.warmup < 0:
        raise UsageError("--warmup cannot be negative")
    if request.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    if request.max_attempts < 1:
        raise UsageError("--attempts must be at least 1")
    selectors = parse_devices(request.devices, profiles, attached)
    check_targets(selectors, profiles, request.targets)
    if request.fixed_inputs and (request.generate is not None or is_torch_checkpoint(request.model_path)):
        # a checkpoint's eager reference and a generation job's inputs are made elsewhere
        raise UsageError(
            "--fix pins an input of an ONNX model; "
            + ("a generation job" if request.generate is not None else "a PyTorch checkpoint")
            + " takes none",
            hint="submit the ONNX model (a checkpoint's ONNX export), or give the value with --inputs",
        )
    if request.generate is not None:
        return prepare_generation(request, selectors, profiles)
    if is_genai_folder(request.model_path):
        raise UsageError(
            f"{request.model_path} is an ONNX Runtime GenAI folder: it runs as a generation job",
            hint="add --generate prompt=128,decode=64 (docs/generate.md)",
        )
    plan = [(s, t) for s in selectors for t in targets_for(profiles[s.profile], request.targets)]
    if is_torch_checkpoint(request.model_path):
        if request.reference_model is not None:
            raise UsageError(
                "--reference takes an ONNX model; a PyTorch checkpoint is its own reference (eager fp32)"
            )
        source = _ingest_torch(request)
        # without an ONNX export, only targets that convert the checkpoint itself can run
        source.require_runnable([t for _, t in plan])
        return Prepared(source.info, selectors, plan, source.shapes, source.inputs, torch=source)
    plan = _onnx_plan(request, plan)
    info = inspect_model_cached(request.model_path, request.model_cache)
    shapes = resolve_shapes(info, request.shapes)
    given = {} if request.inputs_npz is None else load_npz_inputs(request.inputs_npz, info, {})
    inputs = {**seeded_inputs(info, shapes, request.seed), **given}
    fixed = _pin_inputs(request, info, shapes, given, inputs)
    reference_info = None
    if request.reference_model is not None:
        reference_info = inspect_model_cached(request.reference_model, request.model_cache)
        check_reference_model(info, reference_info)
    return Prepared(info, selectors, plan, shapes, inputs, reference_info, fixed_inputs=fixed)


def _pin_inputs(
    request: SubmitRequest,
    info: ModelInfo,
    shapes: dict[str, tuple[int, ...]],
    given: dict[str, np.ndarray],
    inputs: dict[str, np.ndarray],
) -> dict[str, float]:
    """`--fix`: each pinned input's value replaces its generated (or --inputs) array in `inputs`,
    so the reference and every target run with the value the CoreML lowering folds; the checks
    are the lowering's own, run before anything is compiled or stored."""
    if not request.fixed_inputs:
        return {}
    from ondevice_farm.runtimes.coreml.compile.pinning import (
        check_pinned_names,
        fixes_from_inputs,
        pinned_array,
    )

    check_pinned_names(request.fixed_inputs, [spec.name for spec in info.inputs])
    source = None if request.inputs_npz is None else f"--inputs {request.inputs_npz.name}"
    fixed = fixes_from_inputs(request.fixed_inputs, given, source)
    dtypes = {spec.name: np.dtype(spec.dtype) for spec in info.inputs}
    for name, value in fixed.items():
        inputs[name] = pinned_array(name, value, shapes[name], dtypes[name])
    return fixed


def run_document(run_id: str, request: SubmitRequest, prepared: Prepared) -> dict[str, Any]:
    info = prepared.info
    # a checkpoint torch.onnx.export refused has no ONNX graph: no opset, no node count
    onnx = prepared.torch is None or prepared.torch.export is not None
    return {
        "run_id": run_id,
        "kind": "submit",
        "model": {
            "name": info.name,
            "sha256": info.sha256,
            "path": str(info.path),
            "opset": info.opset if onnx else None,
            "nodes": info.node_count if onnx else None,
            "inputs": [
                {"name": n, "shape": list(s), "dtype": str(prepared.inputs[n].dtype)}
                for n, s in prepared.shapes.items()
            ],
            "outputs": [{"name": o.name, "dtype": o.dtype} for o in info.outputs],
            **({"source": prepared.torch.document()} if prepared.torch is not None else {}),
        },
        "settings": {
            "runs": request.runs,
            "warmup": request.warmup,
            "sustained_s": request.sustained_s or None,
            "repeats": request.repeats,
            "seed": request.seed,
            "devices": request.devices,
            "targets": None if request.targets is None else [t.name for t in request.targets],
            "reference_model": None if prepared.reference_info is None else str(prepared.reference_info.path),
            "tolerance": _tolerance_setting(request.tolerance),
            # the value each pinned input had in every job, as its dtype holds it (16000, not 16000.0)
            **(
                {"fixed_inputs": {n: prepared.inputs[n].reshape(-1)[0].item() for n in prepared.fixed_inputs}}
                if prepared.fixed_inputs
                else {}
            ),
            **({"generate": request.generate.text()} if request.generate is not None else {}),
        },
    }


def _tolerance_setting(tolerance: Tolerance | ToleranceOverrides | None) -> Any:
    if isinstance(tolerance, ToleranceOverrides):
        return tolerance.to_texts() or None
    return None if tolerance is None else tolerance.to_dict()


def job_tolerance(request: SubmitRequest, artifact: CompiledArtifact) -> Tolerance:
    """The defaults for what the artifact computes in, with the run's overrides on top."""
    if isinstance(request.tolerance, Tolerance):
        return request.tolerance
    tolerance = default_tolerance(artifact.target, artifact.report.precision)
    return request.tolerance.apply(tolerance) if request.tolerance else tolerance
