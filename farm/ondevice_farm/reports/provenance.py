"""How a report says where its figures came from: "est." on estimated per-op times, "planned" on
placements a runtime only planned, "synthetic" on a simulated unit's numbers; one legend for all.

Reads the job document's `provenance` and each op's `time_source` / `placement_source`
(docs/results.md, "Provenance"); a document older than those fields counts as measured.
"""

from __future__ import annotations

from typing import Any

#: the cell prefix of a per-op time by its source
TIME_MARKS = {"estimated": "est.", "synthetic": "syn.", "predicted": "pred."}
LEGEND = (
    ("measured", "profiled on the device, by the runtime that ran the op"),
    ("est. (estimated)", "derived, not timed: the job's formula says from what "
                         "(iOS: MLComputePlan cost weight x median latency)"),
    ("planned", "where the runtime planned to run an op (MLComputePlan's preferred device), "
                "not where it ran"),
    ("syn. (synthetic)", "made up by the simulated agent for load tests; no device ran anything"),
)  # fmt: skip


def job_provenance(job: dict[str, Any]) -> dict[str, Any]:
    found = job.get("provenance")
    if isinstance(found, dict):
        return found
    return {"latency": "measured", "op_times": "measured" if job.get("ops") else None,
            "placement": "measured", "fallbacks": "measured", "formulas": {}}  # fmt: skip


def time_mark(op: dict[str, Any]) -> str:
    """ "est. " (or "syn. ", "pred. ") before a per-op time that was not measured; "" otherwise."""
    mark = TIME_MARKS.get(str(op.get("time_source") or "measured"))
    return f"{mark} " if mark else ""


def placement_mark(op: dict[str, Any]) -> str:
    source = str(op.get("placement_source") or "measured")
    return "" if source == "measured" else f" ({source})"


def op_times_estimated(job: dict[str, Any]) -> bool:
    return job_provenance(job).get("op_times") in ("estimated", "synthetic", "predicted", "mixed")


def describe(job: dict[str, Any]) -> list[tuple[str, str]]:
    """(figure, how it was obtained) for each kind of figure the job holds."""
    provenance = job_provenance(job)
    formulas = provenance.get("formulas") or {}
    rows = []
    for key, label in (
        ("latency", "latency"),
        ("op_times", "per-op times"),
        ("placement", "placement"),
        ("fallbacks", "CPU fallbacks"),
    ):
        source = provenance.get(key)
        if source is None:
            continue
        how = str(source) + (f": {formulas[key]}" if key in formulas else "")
        rows.append((label, how))
    return rows


def time_caveat(job: dict[str, Any]) -> str:
    """What a finding that ranks by per-op time must add when those times are not measured."""
    source = job_provenance(job).get("op_times")
    if source == "estimated":
        return " (per-op times estimated from MLComputePlan's cost weights, not measured)"
    if source == "synthetic":
        return " (synthetic per-op times from a simulated unit)"
    return ""
