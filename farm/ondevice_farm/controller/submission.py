"""A submission as asked and as checked: the request, how progress is told, the checks run before
anything is compiled or stored (`prepare`), the run's document and each job's tolerance."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ondevice_farm.analysis.tolerance import Tolerance, ToleranceOverrides, default_tolerance
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.config import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PLACEMENT_DEADLINE_S,
    DEFAULT_REPEATS,
    DEFAULT_SEED,
    DEFAULT_SUSTAINED_WINDOW_S,
    DEFAULT_TIMED_RUNS,
    DEFAULT_WARMUP_RUNS,
    FarmHome,
)
from ondevice_farm.controller.selection import DeviceSelector, check_targets, parse_devices, targets_for
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
    from ondevice_farm.generate.spec import GenerateSpec, PromptSource
    from ondevice_farm.generate.trace import GenerationPlan
    from ondevice_farm.torch_source.ingest import TorchSource


@dataclass(frozen=True)
class SubmitRequest:
    model_path: Path
    devices: str
    targets: list[Target] | None = None
    runs: int = DEFAULT_TIMED_RUNS
    warmup: int = DEFAULT_WARMUP_RUNS
    #: measurement sessions per job, each with its own warm-up and timed runs
    repeats: int = DEFAULT_REPEATS
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    inputs_npz: Path | None = None
    seed: int = DEFAULT_SEED
    #: overrides of the per-precision defaults (--tolerance, a suite's `tolerance:`), or one
    #: Tolerance for every job
    tolerance: Tolerance | ToleranceOverrides | None = None
    #: another model with the same inputs and outputs whose host outputs are the reference
    #: (the float model of a quantised artifact); None: the submitted model itself
    reference_model: Path | None = None
    intra_op_threads: int | None = None
    profile_ops: bool = True
    coreml_precision: str = "fp16"
    #: QDQ models on CoreML: keep 8-bit weights/activations, or fold to float
    coreml_quantization: str = "keep"
    #: tries of a job whose unit disconnected or died, on other units of the profile
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    #: how long a job waits while no unit of its profile is up
    placement_deadline_s: float = DEFAULT_PLACEMENT_DEADLINE_S
    #: a job pinned to a unit (`pixel8:SERIAL`, `pixel8:*`) whose unit is lost runs on another
    #: unit of the profile instead of failing (a suite's `units_interchangeable: true`)
    units_interchangeable: bool = False
    #: where a PyTorch checkpoint's ONNX exports and eager references are cached (FarmHome.torch)
    torch_cache: Path | None = None
    #: where models' descriptions are cached by content hash (FarmHome.models; None: not cached)
    model_cache: Path | None = None
    #: a sustained phase after the timed runs (0: none), cut into windows of this length
    sustained_s: float = 0.0
    sustained_window_s: float = DEFAULT_SUSTAINED_WINDOW_S
    #: a generation job (`--generate`): MODEL is an ONNX Runtime GenAI folder (docs/generate.md)
    generate: GenerateSpec | None = None
    #: a generation job's prompt (`--prompt-file`) instead of seeded synthetic token ids
    prompt: PromptSource | None = None
    #: `--fix`: scalar inputs pinned to a value for the whole run (the reference, every target's
    #: inputs, the CoreML lowering's constants); None: the value `inputs_npz` holds
    fixed_inputs: dict[str, float | None] = field(default_factory=dict)


@dataclass
class Prepared:
    """A checked submission: what to run, with what, against which reference."""

    info: ModelInfo
    selectors: list[DeviceSelector]
    plan: list[tuple[DeviceSelector, Target]]
    shapes: dict[str, tuple[int, ...]]
    inputs: dict[str, np.ndarray]
    #: the model whose host outputs are the reference: `info` unless --reference names another
    reference_info: ModelInfo | None = None
    #: the checkpoint, its ONNX export (or the export's refusal) and eager reference, where the
    #: source is PyTorch
    torch: TorchSource | None = None
    #: a generation job's token ids and counts (`SubmitRequest.generate`)
    generation: GenerationPlan | None = None
    #: `--fix`: each pinned input's value, also in `inputs`; the CoreML compiles fold it
    fixed_inputs: dict[str, float] = field(default_factory=dict)

    @property
    def reference_source(self) -> ModelInfo:
        return self.reference_info or self.info


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
    """An ONNX model's jobs: a target whose converter reads a PyTorch checkpoint (ExecuTorch,
    LiteRT, coreml-torch) is a usage error when asked for, and left out of a profile's own list."""
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
        from ondevice_farm.controller.generation import prepare_generation

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
    from ondevice_farm.compile.coreml.pinning import check_pinned_names, fixes_from_inputs, pinned_array

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
