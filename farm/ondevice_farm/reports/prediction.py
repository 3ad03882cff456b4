"""What reduced precision alone would do to the outputs, predicted on the host.

For a run with an fp16 job, the farm's CoreML lowering runs the model as an fp16 ML Program in
its host MIL executor (`ondevice_farm.runtimes.coreml.compile.drift.predict_drift`) on the
run's seeded inputs; the SNR of those outputs against the fp32 host reference is what fp16
rounding explains. A device SNR close to it means precision is the whole story; far below it,
something else is wrong. Without coremltools (or the lowering) there is no prediction and the
report says only what it measured."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

#: precisions the host can predict
PREDICTABLE = ("fp16",)


def _shapes(run: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    return {
        str(i["name"]): tuple(int(d) for d in i["shape"])
        for i in (run.get("model") or {}).get("inputs") or []
        if i.get("shape")
    }


def run_inputs(
    model_path: Path, run: dict[str, Any]
) -> tuple[dict[str, np.ndarray], dict[str, tuple[int, ...]]]:
    """The seeded inputs (and input shapes) the run fed its jobs, made again from its settings."""
    from ondevice_farm.inputs import resolve_shapes, seeded_inputs
    from ondevice_farm.model import inspect_model

    info = inspect_model(model_path)
    shapes = resolve_shapes(info, _shapes(run))
    seed = int((run.get("settings") or {}).get("seed") or 0)
    return seeded_inputs(info, shapes, seed), shapes


def predicted_snr_db(model_path: Path, run: dict[str, Any], precision: str) -> dict[str, float]:
    """Output name -> SNR (dB) of the host `precision` prediction against the fp32 reference;
    empty where it cannot be predicted here."""
    if precision not in PREDICTABLE:
        return {}
    try:
        from ondevice_farm.analysis.numeric import diff_output
        from ondevice_farm.reference import reference_outputs
        from ondevice_farm.runtimes.coreml.compile.drift import predict_drift
    except ImportError:
        return {}
    try:
        inputs, shapes = run_inputs(model_path, run)
        with tempfile.TemporaryDirectory(prefix="farm-prediction-") as cache:
            reference = reference_outputs(model_path, "prediction", inputs, Path(cache))
        predicted = predict_drift(model_path, inputs, precision, input_shapes=shapes)
    except Exception:  # a model the host executor cannot run: no prediction, not a failed report
        return {}
    snrs = {n: diff_output(ref, predicted[n]).snr_db for n, ref in reference.items() if n in predicted}
    # an output without an SNR (non-finite, all-zero reference, integer) has no prediction
    return {name: snr for name, snr in snrs.items() if math.isfinite(snr)}
