"""Per-layer error curves for the jobs of a run: where each target starts to drift.

The reference is the source model on the host's ONNX Runtime (CPU, optimisations off, fp32)
with every intermediate value exposed, fed the run's seeded inputs again. Each job is reached
the way this host can reach it, and its curve says which (`source`):
- an `ort/*` job on a host device: the job's compiled artifact re-run on this host's ONNX
  Runtime with the same intermediates exposed (`measured`);
- a `coreml/*` job: the ML Program at the job's precision in the host MIL executor (`predicted`);
- an `ort/*` job on a phone that computes in fp16: the fp16-cast copy of the graph on host ORT
  (`predicted`). Other phone jobs need the device itself to return intermediates, which this
  report cannot do after the fact: the curve is absent and the reason says so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ondevice_farm.analysis.divergence import DEFAULT_LAYER_BUDGET, DivergenceCurve, Probe, find_divergence
from ondevice_farm.analysis.intermediates import LayerPoint, layer_points, run_with_outputs
from ondevice_farm.analysis.tolerance import default_tolerance
from ondevice_farm.errors import FarmError, UsageError
from ondevice_farm.reports.compare import Column
from ondevice_farm.targets import Target

PREDICTED_NOTE = (
    "predicted on this host (fp16 storage between ops, fp32 inside them); not measured on a device"
)
MEASURED_NOTE = "the job's artifact re-run on this host's ONNX Runtime with intermediates exposed"


@contextlib.contextmanager
def _quiet_numpy() -> Iterator[None]:
    # overflow to inf is exactly what the curve is looking for: no warning per op
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        yield


def _artifact(column: Column, artifacts_root: Path | None) -> Path | None:
    sha = str(column.job.get("artifact_sha256") or "")
    if artifacts_root is None or not sha:
        return None
    found = sorted((artifacts_root / sha[:2] / sha).glob("*.onnx"))
    return found[0] if found else None


def _coreml_probe(
    model_path: Path, inputs: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]], precision: str
) -> Probe:
    from ondevice_farm.runtimes.coreml.compile.layer_values import predicted_layer_values

    def probe(names: list[str]) -> dict[str, np.ndarray]:
        return predicted_layer_values(model_path, inputs, names, precision, input_shapes=shapes)

    return probe


def _probe_for(
    column: Column,
    model_path: Path,
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    shapes: dict[str, tuple[int, ...]],
    host_devices: set[str],
    artifacts_root: Path | None,
) -> tuple[Probe, str, str] | str:
    """(probe, source, note) for the column, or why it has no curve here."""
    target = column.target
    if target.startswith("coreml"):
        precision = column.precision or "fp16"
        if precision not in ("fp16", "fp32"):
            return f"the host MIL executor predicts fp16 and fp32 programs, not {precision}"
        return _coreml_probe(model_path, inputs, shapes, precision), "predicted", PREDICTED_NOTE
    if target.startswith("ort/") and column.device in host_devices:
        artifact = _artifact(column, artifacts_root)
        graph = onnx.load(str(artifact)) if artifact is not None else model

        types = {p.tensor: p.elem_type for p in layer_points(model)}

        def host_probe(names: list[str]) -> dict[str, np.ndarray]:
            return run_with_outputs(graph, inputs, names, optimize=artifact is None, known_types=types)

        return host_probe, "measured", MEASURED_NOTE
    if target.startswith("ort/") and column.precision == "fp16":
        return _fp16_probe(model, inputs), "predicted", PREDICTED_NOTE
    return (
        f"{column.device} is not this host: its intermediates need the device "
        "(`farm diverge RUN --on-device` measures it there)"
    )


def _fp16_probe(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> Probe:
    def probe(names: list[str]) -> dict[str, np.ndarray]:
        return run_with_outputs(model, inputs, names, fp16_storage=True)

    return probe


def prediction_precision(target: str) -> str:
    """What a target without a job is predicted in: CoreML computes an ML Program in fp16 except
    on the CPU alone; an ONNX Runtime accelerator is predicted as fp16 storage."""
    return "fp32" if target == "coreml/cpu" else "fp16"


def snr_floor_db(target: str, precision: str | None) -> float:
    """The SNR floor the output check uses for this target and precision: the layer check and
    the output check agree on what "tolerance" means."""
    try:
        parsed = Target.parse(target)
    except UsageError:
        parsed = Target("?", "?")
    return default_tolerance(parsed, precision).snr_db_min


def _main_backend(column: Column) -> str | None:
    placement = column.placement()
    return max(placement, key=lambda k: placement[k]) if placement else None


def layer_curves(
    run: dict[str, Any],
    columns: list[Column],
    model_path: Path,
    *,
    host_devices: set[str],
    artifacts_root: Path | None = None,
    budget: int = DEFAULT_LAYER_BUDGET,
    predict: tuple[str, ...] = (),
) -> tuple[list[DivergenceCurve], dict[str, str]]:
    """(curves, label -> why it has none) for the run's successful jobs, and a predicted curve
    for each target in `predict` (one the run has no job for)."""
    from ondevice_farm.reports.prediction import run_inputs

    model = onnx.load(str(model_path))
    inputs, shapes = run_inputs(model_path, run)
    points: list[LayerPoint] = layer_points(model)
    with _quiet_numpy():
        reference = run_with_outputs(model, inputs, [p.tensor for p in points])
    curves: list[DivergenceCurve] = []
    missing: dict[str, str] = {}

    def add(
        label: str, target: str, precision: str | None, found: tuple[Probe, str, str], backend: str | None
    ) -> None:
        probe, source, note = found
        floor = snr_floor_db(target, precision)
        try:
            with _quiet_numpy():
                layers, first, method, runs = find_divergence(points, reference, probe, floor, budget=budget)
        except FarmError as exc:
            missing[label] = exc.message
            return
        curves.append(
            DivergenceCurve(
                label=label,
                target=target,
                precision=precision,
                source=source,
                method=method,
                runs=runs,
                snr_floor_db=floor,
                layers=layers,
                first=first,
                backend=backend,
                note=note,
            )
        )

    for column in columns:
        if not column.ok:
            continue
        found = _probe_for(column, model_path, model, inputs, shapes, host_devices, artifacts_root)
        if isinstance(found, str):
            missing[column.label] = found
        else:
            add(column.label, column.target, column.precision, found, _main_backend(column))
    for target in predict:
        precision = prediction_precision(target)
        probe = (
            _coreml_probe(model_path, inputs, shapes, precision)
            if target.startswith("coreml")
            else _fp16_probe(model, inputs)
        )
        add(f"{target} (predicted)", target, precision, (probe, "predicted", PREDICTED_NOTE), None)
    return curves, missing
