"""Turn what a device measured into the job document (docs/results.md, farm/schema/)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from agents.base import DeviceRun, OpTiming, Thermal
from farm.analysis.numeric import ReferenceCheck, Tolerance, compare_outputs
from farm.analysis.sessions import sessions_document
from farm.analysis.topk import topk_agreement
from farm.analysis.transfers import transfer_report
from farm.compile.placement import CPU_PROVIDERS
from farm.compile.report import CompiledArtifact
from farm.errors import DeviceError
from farm.targets import Target

BYTES_PER_MB = 1024 * 1024
#: trace event args worth keeping; ORT adds per-thread scheduling stats we do not use
TRACE_ARGS = ("op_name", "provider", "node_index")


def op_table(ops: list[OpTiming]) -> list[dict[str, Any]]:
    total = sum(op.mean_us for op in ops) or 1.0
    return [
        {
            "name": op.name,
            "op_type": op.op_type,
            "provider": op.provider,
            "mean_us": round(op.mean_us, 3),
            "share": round(op.mean_us / total, 6),
        }
        for op in ops
    ]


def fallback_table(ops: list[dict[str, Any]], target: Target) -> list[dict[str, Any]]:
    """Ops the device ran on its CPU although the target asked for an accelerator."""
    if not target.is_accelerator:
        return []
    return [op for op in ops if op["provider"] in CPU_PROVIDERS]


def _thermal(value: Thermal | None) -> dict[str, Any] | None:
    if value is None:
        return None
    return {"status": value.status, "temperatures_c": value.temperatures_c, "battery_pct": value.battery_pct}


def _finite(value: float) -> float | None:
    """JSON has no NaN: a metric that cannot be computed (shape mismatch) is null."""
    return value if math.isfinite(value) else None


def _reference(check: ReferenceCheck) -> dict[str, Any]:
    return {
        "outputs": {
            name: {
                "max_abs": _finite(d.max_abs),
                "mean_abs": _finite(d.mean_abs),
                "rmse": _finite(d.rmse),
                "cosine": _finite(d.cosine),
                "snr_db": _finite(d.snr_db),
                "shape_matches": d.shape_matches,
            }
            for name, d in check.outputs.items()
        },
        "missing_outputs": list(check.missing),
        "tolerance": {"snr_db_min": check.tolerance.snr_db_min, "cosine_min": check.tolerance.cosine_min},
        "passed": check.passed,
    }


def _transfers(run: DeviceRun, target: Target) -> dict[str, Any] | None:
    """Copies between an accelerator and the CPU around each fallback (ORT's Memcpy nodes)."""
    if target.runtime != "ort" or not target.is_accelerator or not run.ops:
        return None
    return transfer_report(run.ops, target.ort_providers()[0]).to_dict()


def latency_document(run: DeviceRun) -> dict[str, Any]:
    """From the samples of every session (farm/analysis/sessions.py has the definitions); or,
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
) -> dict[str, Any]:
    """A complete job: `base` carries ids, device, model and timing of the job itself."""
    ops = op_table(run.ops)
    check = compare_outputs(reference, run.outputs, tolerance)
    reference_doc = _reference(check)
    for name, entry in reference_doc["outputs"].items():
        agreement = topk_agreement(reference[name], run.outputs[name])
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
        trace_events=slim_trace(run.trace_events),
    )
    return document


def failed_document(base: dict[str, Any], error: str, error_type: str) -> dict[str, Any]:
    """A failed job records its error and nothing else."""
    document = dict(base)
    document.update(status="failed", error=error, error_type=error_type)
    return document
