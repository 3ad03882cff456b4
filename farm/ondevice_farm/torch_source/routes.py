"""Both CoreML routes of a PyTorch source, compiled and predicted on the host, against eager.

For each route the MIL program coremltools produced runs in the farm's host MIL executor
(fp16 storage between ops): the difference to the checkpoint's eager fp32 outputs is a
*prediction* of the device's drift, and the two routes' predictions side by side show how
much the route, not the device, changes the numbers. The ONNX export itself on ONNX Runtime
(CPU, optimisations off) is a row too: the export's own error, measured on the host.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.analysis.numeric import diff_output
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.errors import FarmError
from ondevice_farm.runtimes.coreml.compile.drift import PREDICTION_NOTE
from ondevice_farm.targets import Target
from ondevice_farm.torch_source.ingest import TorchSource

#: the compute units the host study compiles for: placement does not change the MIL program
STUDY_BACKEND = "all"


def _diffs(reference: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    out = {}
    for name, want in reference.items():
        if name in got:
            d = diff_output(want, got[name])
            out[name] = {"max_abs": d.max_abs, "snr_db": d.snr_db, "cosine": d.cosine}
    return out


def export_check(source: TorchSource, onnx_outputs: dict[str, np.ndarray]) -> dict[str, Any]:
    """The ONNX export on ONNX Runtime (the farm's ONNX reference run) against eager."""
    return {
        "provenance": "measured",
        "how": "ONNX export on ONNX Runtime CPU, optimisations off, fp32, against PyTorch eager",
        "outputs": _diffs(source.eager, onnx_outputs),
    }


def compile_routes(
    source: TorchSource, backend: str, out_dir: Path, precision: str
) -> tuple[CompiledArtifact, CompiledArtifact | FarmError]:
    """`coreml/<backend>` from the ONNX export and `coreml-torch/<backend>` from the checkpoint."""
    from ondevice_farm.runtimes.coreml.compile import compile_coreml
    from ondevice_farm.runtimes.coreml.compile.torch_route import compile_coreml_torch

    target = Target("coreml", backend)
    onnx_route = compile_coreml(
        source.onnx_path(), target, out_dir / "onnx", precision=precision, input_shapes=source.shapes
    )
    try:
        torch_route: CompiledArtifact | FarmError = compile_coreml_torch(
            source.checkpoint,
            target.with_route("torch"),
            out_dir / "torch",
            source.shapes,
            precision=precision,
        )
    except FarmError as exc:
        torch_route = exc
    return onnx_route, torch_route


def route_study(source: TorchSource, precision: str = "fp16") -> dict[str, Any]:
    """`model.source.routes` of a run document: both routes compiled, compared and predicted."""
    from ondevice_farm.runtimes.coreml.compile import predict_drift
    from ondevice_farm.runtimes.coreml.compile.routes import (
        compare_routes,
        describe_divergence,
        route_summary,
    )

    study: dict[str, Any] = {"precision": precision, "prediction_note": PREDICTION_NOTE}
    with tempfile.TemporaryDirectory(prefix="farm-routes-") as tmp:
        onnx_route, torch_route = compile_routes(source, STUDY_BACKEND, Path(tmp), precision)
        predicted: dict[str, dict[str, Any]] = {}
        try:
            drift = predict_drift(source.onnx_path(), source.inputs, precision, input_shapes=source.shapes)
            renamed = dict(zip(source.eager, drift.values(), strict=False))
            predicted["onnx"] = {"provenance": "predicted", "outputs": _diffs(source.eager, renamed)}
        except FarmError as exc:
            predicted["onnx"] = {"provenance": "predicted", "error": exc.message}
        if isinstance(torch_route, FarmError):
            study["onnx"] = route_summary(onnx_route)
            study["torch"] = {"error": torch_route.message}
        else:
            study.update(compare_routes(onnx_route, torch_route))
            study["divergence"] = describe_divergence(study)
            try:
                # the saved package, as the device gets it; its outputs come in the checkpoint's order
                drift = predict_drift(torch_route.path, source.inputs, precision)
                renamed = dict(zip(source.eager, drift.values(), strict=False))
                predicted["torch"] = {"provenance": "predicted", "outputs": _diffs(source.eager, renamed)}
            except FarmError as exc:
                predicted["torch"] = {"provenance": "predicted", "error": exc.message}
    study["predicted"] = predicted
    return study
