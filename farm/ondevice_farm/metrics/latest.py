"""The few numbers of a stored job document that the exporter shows, in base units.

Job documents keep milliseconds and MiB (docs/results.md); Prometheus wants seconds and bytes.
Only these paths are pulled out of each document (by the database), never the whole document:
a job's op table, sustained windows and trace are far bigger than what a scrape needs, and stay
in the store and the reports (docs/metrics.md, "Series budget").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.metrics.budget import DEFAULT_OP_BACKENDS, SeriesKey, bounded_backends

MS_PER_S = 1000.0
BYTES_PER_MIB = 1024 * 1024
J_PER_MJ = 1e-3

#: quantile label -> the key in the document's latency_ms (p90 and the rest: the reports')
LATENCY_QUANTILES: tuple[tuple[str, str], ...] = (("0.5", "p50"), ("0.99", "p99"))

#: what decides whether a combination's newest job is exported (`budget.exported_jobs`)
KEY_PATHS: tuple[str, ...] = ("$.model.name", "$.device", "$.target", "$.finished_at", "$.run_id")

JOB_PATHS: tuple[str, ...] = (
    "$.model.name",
    "$.device",
    "$.unit",
    "$.target",
    "$.finished_at",
    "$.latency_ms.p50",
    "$.latency_ms.p99",
    "$.first_inference_ms",
    "$.load_ms",
    "$.warm_load_ms",
    "$.peak_memory_mb",
    "$.placement",
    "$.compile.placement",
    "$.fallback_ops",
    "$.compile.fallback_ops",
    "$.reference.outputs",
    "$.reference.passed",
    "$.reference.status",
    "$.thermal.after.temperatures_c",
    "$.sustained.summary.slowdown",
    "$.energy.mj_per_inference",
    "$.energy.source",
    "$.provenance.latency",
    "$.provenance.placement",
    "$.generation.ttft_ms.median",
)


@dataclass(frozen=True)
class ReferenceNumbers:
    max_abs_error: float | None
    snr_db: float | None
    #: passed | failed | not_compared
    state: str = "passed"


@dataclass(frozen=True)
class LatestResult:
    """One (model, device, target) series: its newest successful job."""

    model: str
    device: str
    unit: str
    target: str
    finished_at: float
    #: quantile label -> seconds
    latency_s: dict[str, float] = field(default_factory=dict)
    first_inference_s: float | None = None
    session_load_s: float | None = None
    warm_load_s: float | None = None
    peak_memory_bytes: float | None = None
    #: backend (execution provider / compute unit) -> ops it ran, at most DEFAULT_OP_BACKENDS
    #: entries (budget.bounded_backends)
    ops_by_backend: dict[str, int] = field(default_factory=dict)
    cpu_fallback_ops: int = 0
    reference: ReferenceNumbers | None = None
    #: the hottest sensor read on the unit after the job, degrees Celsius
    max_temperature_c: float | None = None
    #: steady-state p50 / first-span p50 of a sustained run; None without one
    sustained_slowdown: float | None = None
    #: energy per inference during the timed runs (J); None without one
    energy_j: float | None = None
    #: how `energy_j` was obtained ("estimated": battery draw under load minus idle)
    energy_source: str = "estimated"
    #: how the op counts were obtained: "measured" (the profiled run), "planned" (MLComputePlan,
    #: or the compiler's placement where the run has no op profile), "synthetic"
    placement_source: str = "measured"
    #: "synthetic" for a simulated unit: its reference series are never exported
    latency_source: str = "measured"
    #: a generation job's median TTFT (seconds)
    generation_ttft_s: float | None = None

    @property
    def labels(self) -> tuple[str, str, str]:
        return (self.model, self.device, self.target)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _scaled(value: Any, factor: float) -> float | None:
    number = _number(value)
    return None if number is None else number * factor


def _state(outputs: Any, passed: Any, status: Any) -> str | None:
    """As `ondevice_farm.analysis.reference_state` reads it, from the few fields a scrape pulls out."""
    if status in ("passed", "failed", "not_compared"):
        return str(status)
    if not isinstance(passed, bool):
        return None
    return "passed" if passed else ("failed" if outputs else "not_compared")


def _reference(outputs: Any, passed: Any, status: Any = None) -> ReferenceNumbers | None:
    """The worst output decides: the largest error, the lowest signal-to-noise ratio."""
    state = _state(outputs, passed, status)
    if not isinstance(outputs, dict) or state is None:
        return None
    errors = [_number(o.get("max_abs")) for o in outputs.values() if isinstance(o, dict)]
    snrs = [_number(o.get("snr_db")) for o in outputs.values() if isinstance(o, dict)]
    known_errors = [e for e in errors if e is not None]
    known_snrs = [s for s in snrs if s is not None]
    return ReferenceNumbers(
        max_abs_error=max(known_errors) if known_errors else None,
        snr_db=min(known_snrs) if known_snrs else None,
        state=state,
    )


def _counts(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


def _hottest(value: Any) -> float | None:
    readings = [_number(v) for v in value.values()] if isinstance(value, dict) else []
    known = [celsius for celsius in readings if celsius is not None]
    return max(known) if known else None


def parse_key(values: list[Any]) -> SeriesKey:
    """`values` are the document's values at KEY_PATHS, in that order."""
    model, device, target, finished_at, run_id = values
    return SeriesKey(str(model), str(device), str(target), _number(finished_at) or 0.0, str(run_id or ""))


def parse_latest(values: list[Any], op_backends: int = DEFAULT_OP_BACKENDS) -> LatestResult:
    """`values` are the document's values at JOB_PATHS, in that order."""
    doc = dict(zip(JOB_PATHS, values, strict=True))
    latency = {
        quantile: seconds
        for quantile, key in LATENCY_QUANTILES
        if (seconds := _scaled(doc[f"$.latency_ms.{key}"], 1 / MS_PER_S)) is not None
    }
    # The profiled run says where ops really ran; a run without an op profile falls back to
    # where the compiler placed them.
    ops = _counts(doc["$.placement"]) or _counts(doc["$.compile.placement"])
    if _counts(doc["$.placement"]):
        placement_source = str(doc["$.provenance.placement"] or "measured")
    else:
        placement_source = "planned"
    fallbacks = doc["$.fallback_ops"] if doc["$.placement"] else doc["$.compile.fallback_ops"]
    return LatestResult(
        model=str(doc["$.model.name"]),
        device=str(doc["$.device"]),
        unit=str(doc["$.unit"] or ""),
        target=str(doc["$.target"]),
        finished_at=_number(doc["$.finished_at"]) or 0.0,
        latency_s=latency,
        first_inference_s=_scaled(doc["$.first_inference_ms"], 1 / MS_PER_S),
        session_load_s=_scaled(doc["$.load_ms"], 1 / MS_PER_S),
        warm_load_s=_scaled(doc["$.warm_load_ms"], 1 / MS_PER_S),
        peak_memory_bytes=_scaled(doc["$.peak_memory_mb"], BYTES_PER_MIB),
        ops_by_backend=bounded_backends(ops, op_backends),
        cpu_fallback_ops=len(fallbacks) if isinstance(fallbacks, list) else 0,
        reference=_reference(
            doc["$.reference.outputs"], doc["$.reference.passed"], doc["$.reference.status"]
        ),
        max_temperature_c=_hottest(doc["$.thermal.after.temperatures_c"]),
        sustained_slowdown=_number(doc["$.sustained.summary.slowdown"]),
        energy_j=_scaled(doc["$.energy.mj_per_inference"], J_PER_MJ),
        energy_source=str(doc["$.energy.source"] or "estimated"),
        placement_source=placement_source,
        latency_source=str(doc["$.provenance.latency"] or "measured"),
        generation_ttft_s=_scaled(doc["$.generation.ttft_ms.median"], 1 / MS_PER_S),
    )
