"""Turn what a device measured into the job document (docs/results.md, farm/ondevice_farm/schema/)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from ondevice_farm.analysis.energy import energy_document
from ondevice_farm.analysis.latency import session_p50
from ondevice_farm.analysis.numeric import FLOAT, OutputDiff, ReferenceCheck, Tolerance, compare_outputs
from ondevice_farm.analysis.op_table import op_table
from ondevice_farm.analysis.sessions import sessions_document
from ondevice_farm.analysis.sustained import sustained_document
from ondevice_farm.analysis.topk import index_agreement, topk_agreement
from ondevice_farm.analysis.transfers import transfer_report
from ondevice_farm.compile.placement import cpu_providers
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.errors import DeviceError
from ondevice_farm.generate.metrics import generation_document
from ondevice_farm.measurement import DeviceRun, OpTiming, PairedTrace, Thermal
from ondevice_farm.targets import Target

BYTES_PER_MB = 1024 * 1024
#: trace event args worth keeping; ORT adds per-thread scheduling stats we do not use
TRACE_ARGS = ("op_name", "provider", "node_index")


def provenance(run: DeviceRun, ops: list[OpTiming]) -> dict[str, Any]:
    """How each kind of figure in the job was obtained (docs/results.md, "Provenance")."""
    times = sorted({op.source for op in ops})
    return {
        "latency": run.latency_source,
        "op_times": (times[0] if len(times) == 1 else "mixed") if times else None,
        "placement": run.placement_source if ops or run.placement else None,
        "fallbacks": run.placement_source if ops or run.placement else None,
        "outputs": ("synthetic" if run.latency_source == "synthetic" else "measured")
        if run.outputs
        else None,
        "formulas": dict(run.formulas),
    }


def fallback_table(ops: list[dict[str, Any]], target: Target) -> list[dict[str, Any]]:
    """Ops the device ran on its CPU although the target asked for an accelerator."""
    if not target.is_accelerator:
        return []
    cpu = cpu_providers()
    return [op for op in ops if op["provider"] in cpu]


def _thermal(value: Thermal | None) -> dict[str, Any] | None:
    if value is None:
        return None
    return {"status": value.status, "temperatures_c": value.temperatures_c, "battery_pct": value.battery_pct}


def _finite(value: float) -> float | None:
    """JSON has no NaN: a metric that cannot be computed (shape mismatch) is null."""
    return value if math.isfinite(value) else None


def _output_entry(diff: OutputDiff, tolerance: Tolerance) -> dict[str, Any]:
    failure = diff.failure(tolerance)
    entry: dict[str, Any] = {
        "kind": diff.kind,
        "dtype": diff.dtype,
        "actual_dtype": diff.actual_dtype,
        "elements": diff.elements,
        "passed": failure is None,
        "reason": failure,
        "max_abs": _finite(diff.max_abs),
        "mean_abs": _finite(diff.mean_abs),
        "rmse": _finite(diff.rmse),
        "cosine": _finite(diff.cosine),
        "snr_db": _finite(diff.snr_db),
        "shape_matches": diff.shape_matches,
    }
    if diff.kind == FLOAT:
        entry["outside"] = diff.outside
        entry["outside_fraction"] = diff.outside_fraction
        entry["nonfinite"] = _nonfinite(diff)
    else:
        entry["mismatches"] = diff.mismatches
        entry["exact_match"] = diff.exact_match
        if diff.nonfinite:
            entry["nonfinite"] = _nonfinite(diff)
    return entry


def _nonfinite(diff: OutputDiff) -> dict[str, dict[str, int]]:
    return {"reference": dict(diff.nonfinite_reference), "actual": dict(diff.nonfinite_actual)}


def reference_section(check: ReferenceCheck, reference_model: dict[str, Any] | None = None) -> dict[str, Any]:
    """The job document's `reference`: its state (passed, failed, not_compared), why, and per output
    the metrics of its kind. `reference_model`: which model computed the reference outputs."""
    failures = check.failures
    state = check.state
    reason = check.not_compared_reason if state == "not_compared" else "; ".join(failures) or None
    return {
        "status": state,
        "passed": None if state == "not_compared" else state == "passed",
        "reason": reason,
        "failures": failures,
        "model": reference_model,
        "outputs": {name: _output_entry(d, check.tolerance) for name, d in check.outputs.items()},
        "missing_outputs": list(check.missing),
        "tolerance": check.tolerance.to_dict(),
    }


def _no_outputs_reason(run: DeviceRun) -> str:
    runner = run.runner.split(" (")[0] or "the runner"
    if runner.startswith("onnxruntime_perf_test"):
        return "onnxruntime_perf_test measures latency only and returns no outputs to compare"
    return f"{runner} returned no outputs to compare"


def _transfers(run: DeviceRun, target: Target) -> dict[str, Any] | None:
    """Copies between an accelerator and the CPU around each fallback (ORT's Memcpy nodes)."""
    if target.runtime != "ort" or not target.is_accelerator or not run.ops:
        return None
    return transfer_report(run.ops, target.ort_providers()[0]).to_dict()


def latency_document(run: DeviceRun) -> dict[str, Any]:
    """From the samples of every session (farm/ondevice_farm/analysis/sessions.py has the definitions); or,
    where the runner gave only a summary, from that (no std, cv or samples, and the runner's own
    percentile method named)."""
    if run.samples_ms:
        return sessions_document(run.repeat_samples_ms or [run.samples_ms])
    summary = run.latency_summary_ms
    if not {"p50", "p90", "p99"} <= set(summary):
        raise DeviceError("the device reported neither latency samples nor percentiles")
    keys = ("p50", "p90", "p99", "mean", "min", "max")
    return {
        **{k: summary.get(k) for k in keys},
        "std": None,
        "cv": None,
        "samples": [],
        "percentile_method": run.percentile_method or "the runner's own",
    }


def slim_trace(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    slim = []
    for event in events:
        args = event.get("args") or {}
        slim.append(
            {
                "name": event.get("name"),
                "cat": event.get("cat"),
                "ph": event.get("ph", "X"),
                "ts": event.get("ts"),
                "dur": event.get("dur"),
                "args": {k: args[k] for k in TRACE_ARGS if k in args},
            }
        )
    return slim


def job_document(
    *,
    base: dict[str, Any],
    target: Target,
    artifact: CompiledArtifact,
    run: DeviceRun,
    reference: dict[str, np.ndarray],
    tolerance: Tolerance,
    reference_model: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A complete job: `base` carries ids, device, model and timing of the job itself."""
    ops = op_table(run.ops, run.placement_source)
    check = compare_outputs(reference, run.outputs, tolerance, no_outputs_reason=_no_outputs_reason(run))
    reference_doc = reference_section(check, reference_model)
    for name, entry in reference_doc["outputs"].items():
        ref, got = np.asarray(reference[name]), np.asarray(run.outputs[name])
        agreement = topk_agreement(ref, got) or index_agreement(ref, got)
        if agreement is not None:
            entry["topk"] = agreement
    document = dict(base)
    document.update(
        status="ok",
        error=None,
        runner=run.runner,
        latency_ms=latency_document(run),
        load_ms=run.load_ms,
        first_inference_ms=_finite(run.first_inference_ms),
        peak_memory_mb=None if run.peak_memory_bytes is None else run.peak_memory_bytes / BYTES_PER_MB,
        peak_memory_kind=run.peak_memory_kind or None,
        compile=artifact.report.to_dict(),
        artifact_sha256=artifact.sha256,
        precision=artifact.report.precision,
        placement=dict(Counter(op["provider"] for op in ops)),
        ops=ops,
        fallback_ops=fallback_table(ops, target),
        transfers=_transfers(run, target),
        reference=reference_doc,
        thermal={"before": _thermal(run.thermal_before), "after": _thermal(run.thermal_after)},
        notes=list(artifact.report.notes) + list(run.notes),
        provenance=provenance(run, run.ops),
        trace_events=slim_trace(run.trace_events),
        warm_load_ms=run.warm_load_ms,
        warm_load_method=run.warm_load_method or None,
    )
    if run.controls:
        document["controls"] = dict(run.controls)
    if run.paired is not None:
        document["paired"] = paired_document(run.paired)
    if run.sustained is not None:
        document["sustained"] = sustained_document(run.sustained)
    if run.energy is not None:
        document["energy"] = energy_document(run.energy)
    if run.generation is not None:
        document["generation"] = generation_document(run.generation, run.outputs, reference)
    return document


def paired_document(trace: PairedTrace) -> dict[str, Any]:
    """A paired job's rounds as stored: order and each session's p50 (measured), per round."""
    return {
        "seed": trace.seed,
        "stopped": trace.stopped,
        "elapsed_s": trace.elapsed_s,
        "controls": dict(trace.controls),
        "rounds": [
            {
                "order": r.order,
                "baseline_p50_ms": session_p50(r.baseline_samples_ms),
                "candidate_p50_ms": session_p50(r.candidate_samples_ms),
                "started_at": r.started_at,
            }
            for r in trace.rounds
        ],
    }


def failed_document(base: dict[str, Any], error: str, error_type: str) -> dict[str, Any]:
    """A failed job records its error and nothing else."""
    document = dict(base)
    document.update(status="failed", error=error, error_type=error_type)
    return document
