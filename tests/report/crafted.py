"""Crafted job documents for the findings rules: each states the one difference a rule looks for.
They are test inputs, not measurements."""

from __future__ import annotations

from typing import Any


def job(
    device: str = "phone",
    target: str = "ort/nnapi",
    *,
    p50: float = 1.0,
    run_id: str = "run-a",
    ops: list[tuple[str, str, str, float]] | None = None,
    fallbacks: tuple[str, ...] = (),
    precision: str = "fp32",
    snr_db: float | None = 90.0,
    passed: bool = True,
    cv: float = 0.01,
    fusions: dict[str, int] | None = None,
    nodes_after: int = 10,
    partitions: int = 1,
) -> dict[str, Any]:
    op_rows = [
        {"name": n, "op_type": t, "provider": p, "mean_us": us, "share": 0.0} for n, t, p, us in ops or []
    ]
    total = sum(o["mean_us"] for o in op_rows) or 1.0
    for o in op_rows:
        o["share"] = o["mean_us"] / total
    return {
        "job_id": f"{run_id}-{device}-{target}",
        "run_id": run_id,
        "device": device,
        "target": target,
        "status": "ok",
        "error": None,
        "runner": "crafted",
        "precision": precision,
        "latency_ms": {
            "p50": p50,
            "p90": p50,
            "p99": p50,
            "mean": p50,
            "min": p50,
            "max": p50,
            "std": 0.0,
            "cv": cv,
            "samples": [p50] * 5,
        },
        "first_inference_ms": p50 * 3,
        "load_ms": 1.0,
        "peak_memory_mb": 10.0,
        "compile": {
            "nodes_before": 20,
            "nodes_after": nodes_after,
            "partitions": partitions,
            "precision": precision,
            "fusions": [{"op_type": t, "before": 0, "after": n} for t, n in (fusions or {}).items()],
            "op_types_before": {},
            "op_types_after": dict(fusions or {}),
            "placement": {},
            "node_placement": {},
        },
        "placement": {},
        "ops": op_rows,
        "fallback_ops": [o for o in op_rows if o["name"] in fallbacks],
        "reference": {
            "outputs": {"logits": {"snr_db": snr_db, "max_abs": 1e-3, "cosine": 0.999, "rmse": 1e-4}},
            "missing_outputs": [],
            "passed": passed,
            "tolerance": {"snr_db_min": 30, "cosine_min": 0.99},
        },
        "trace_events": [],
    }


def run(*jobs: dict[str, Any], run_id: str = "run-a") -> dict[str, Any]:
    return {"run_id": run_id, "model": {"name": "crafted"}, "jobs": list(jobs)}
