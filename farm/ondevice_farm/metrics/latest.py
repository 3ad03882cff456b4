"""The few numbers of a stored job document that the exporter shows, in base units.

Job documents keep milliseconds and MiB (docs/results.md); Prometheus wants seconds and bytes.
Only these paths are pulled out of each document (by SQLite), never the whole document: a
job's op table and trace are far bigger than what a scrape needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

MS_PER_S = 1000.0
BYTES_PER_MIB = 1024 * 1024

#: quantile label -> the key in the document's latency_ms
LATENCY_QUANTILES: tuple[tuple[str, str], ...] = (("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99"))

JOB_PATHS: tuple[str, ...] = (
    "$.model.name",
    "$.device",
    "$.unit",
    "$.target",
    "$.finished_at",
    "$.latency_ms.p50",
    "$.latency_ms.p90",
    "$.latency_ms.p99",
    "$.first_inference_ms",
    "$.load_ms",
    "$.peak_memory_mb",
    "$.placement",
    "$.compile.placement",
    "$.fallback_ops",
    "$.compile.fallback_ops",
    "$.compile.partitions",
    "$.reference.outputs",
    "$.reference.passed",
    "$.reference.status",
    "$.thermal.after.temperatures_c",
    "$.warm_load_ms",
    "$.sustained.summary.slowdown",
    "$.sustained.summary.time_to_first_throttle_s",
    "$.energy.mj_per_inference",
    "$.energy.uncertainty_mj",
    "$.energy.source",
    "$.provenance.latency",
    "$.provenance.placement",
    "$.sustained.windows",
    "$.sustained.summary.energy_mj_per_inference",
    "$.generation.ttft_ms.median",
    "$.generation.decode_tokens_per_s.median",
    "$.ops",
)
#: quantile label -> the key in a sustained window (docs/results.md, "Sustained runs")
WINDOW_QUANTILES: tuple[tuple[str, str], ...] = (("0.5", "p50_ms"), ("0.9", "p90_ms"), ("0.99", "p99_ms"))
J_PER_MJ = 1e-3
US_PER_S = 1e6
#: kernels per series in the op-time gauges: the slowest, by the op table's statistic; a model's
#: full table (hundreds of kernels) is the report's, not a scrape's
DEFAULT_OP_KERNELS = 10


@dataclass(frozen=True)
class ReferenceNumbers:
    max_abs_error: float | None
    snr_db: float | None
    #: None: not compared (no farm_reference_passed series)
    passed: bool | None
    #: passed | failed | not_compared
    state: str = "passed"


@dataclass(frozen=True)
class SustainedWindowNumbers:
    """One window of a sustained run, in base units: latency by quantile label, the hottest sensor."""

    latency_s: dict[str, float]
    max_temperature_c: float | None


@dataclass(frozen=True)
class OpTimeNumbers:
    """One of a job's slowest kernels, in seconds: its time per profiled run by median and mean,
    its share of the op time by the statistic `share_of` names."""

    kernel: str
    op_type: str
    backend: str
    median_s: float | None
    mean_s: float | None
    share: float | None
    #: "median" or "mean": what `share` is of
    share_of: str
    #: how the times were obtained (measured, estimated, synthetic)
    source: str


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
    peak_memory_bytes: float | None = None
    #: backend (execution provider / compute unit) -> ops it ran
    ops_by_backend: dict[str, int] = field(default_factory=dict)
    cpu_fallback_ops: int = 0
    partitions: int | None = None
    reference: ReferenceNumbers | None = None
    #: sensor -> degrees Celsius, read on the unit after the job
    temperatures_c: dict[str, float] = field(default_factory=dict)
    warm_load_s: float | None = None
    #: steady-state p50 / first-span p50 of a sustained run; None without one
    sustained_slowdown: float | None = None
    sustained_throttle_s: float | None = None
    #: energy per inference during the timed runs (J) and its standard uncertainty; None without one
    energy_j: float | None = None
    energy_uncertainty_j: float | None = None
    #: how `energy_j` was obtained ("estimated": battery draw under load minus idle)
    energy_source: str = "estimated"
    #: the sustained run's windows in order (window 1 first); empty without one
    sustained_windows: tuple[SustainedWindowNumbers, ...] = ()
    #: energy per inference over the sustained run, joules; None where the unit exposes no counter
    sustained_energy_j: float | None = None
    #: how the op counts were obtained: "measured" (the profiled run), "planned" (MLComputePlan,
    #: or the compiler's placement where the run has no op profile), "synthetic"
    placement_source: str = "measured"
    #: "synthetic" for a simulated unit: its reference series are never exported
    latency_source: str = "measured"
    #: a generation job's median TTFT (seconds) and decode rate (tokens after the first per second)
    generation_ttft_s: float | None = None
    generation_decode_tokens_per_s: float | None = None
    #: the slowest kernels (DEFAULT_OP_KERNELS), slowest first; empty without an op profile
    slowest_ops: tuple[OpTimeNumbers, ...] = ()
    #: profiled runs the per-op statistics are over; None where not recorded
    op_profiled_runs: int | None = None

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
        passed=None if state == "not_compared" else state == "passed",
        state=state,
    )


def _counts(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


def _windows(value: Any) -> tuple[SustainedWindowNumbers, ...]:
    windows = []
    for window in value if isinstance(value, list) else ():
        if not isinstance(window, dict):
            continue
        latency = {
            quantile: seconds
            for quantile, key in WINDOW_QUANTILES
            if (seconds := _scaled(window.get(key), 1 / MS_PER_S)) is not None
        }
        windows.append(SustainedWindowNumbers(latency, _number(window.get("max_temperature_c"))))
    return tuple(windows)


def _slowest_ops(value: Any, count: int = DEFAULT_OP_KERNELS) -> tuple[OpTimeNumbers, ...]:
    """The op table's slowest kernels by the statistic its shares are of (rows stored before
    medians: the mean), as `ondevice_farm.analysis.op_table` ranks them."""
    rows = [row for row in value if isinstance(row, dict)] if isinstance(value, list) else []

    def of(row: dict[str, Any]) -> str:
        return "median" if row.get("share_of") == "median_us" else "mean"

    def time_us(row: dict[str, Any]) -> float:
        return _number(row.get(f"{of(row)}_us")) or 0.0

    return tuple(
        OpTimeNumbers(
            kernel=str(row.get("name", "")),
            op_type=str(row.get("op_type", "")),
            backend=str(row.get("provider", "")),
            median_s=_scaled(row.get("median_us"), 1 / US_PER_S),
            mean_s=_scaled(row.get("mean_us"), 1 / US_PER_S),
            share=_number(row.get("share")),
            share_of=of(row),
            source=str(row.get("time_source") or "measured"),
        )
        for row in sorted(rows, key=lambda r: -time_us(r))[:count]
    )


def _profiled_runs(value: Any) -> int | None:
    runs = [r.get("runs") for r in value if isinstance(r, dict)] if isinstance(value, list) else []
    known = [int(n) for n in runs if isinstance(n, int) and not isinstance(n, bool)]
    return max(known) if known else None


def parse_latest(values: list[Any]) -> LatestResult:
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
    partitions = _number(doc["$.compile.partitions"])
    temperatures = doc["$.thermal.after.temperatures_c"]
    return LatestResult(
        model=str(doc["$.model.name"]),
        device=str(doc["$.device"]),
        unit=str(doc["$.unit"] or ""),
        target=str(doc["$.target"]),
        finished_at=_number(doc["$.finished_at"]) or 0.0,
        latency_s=latency,
        first_inference_s=_scaled(doc["$.first_inference_ms"], 1 / MS_PER_S),
        session_load_s=_scaled(doc["$.load_ms"], 1 / MS_PER_S),
        peak_memory_bytes=_scaled(doc["$.peak_memory_mb"], BYTES_PER_MIB),
        ops_by_backend=ops,
        cpu_fallback_ops=len(fallbacks) if isinstance(fallbacks, list) else 0,
        partitions=None if partitions is None else int(partitions),
        reference=_reference(
            doc["$.reference.outputs"], doc["$.reference.passed"], doc["$.reference.status"]
        ),
        temperatures_c={
            str(sensor): number
            for sensor, value in (temperatures.items() if isinstance(temperatures, dict) else ())
            if (number := _number(value)) is not None
        },
        warm_load_s=_scaled(doc["$.warm_load_ms"], 1 / MS_PER_S),
        sustained_slowdown=_number(doc["$.sustained.summary.slowdown"]),
        sustained_throttle_s=_number(doc["$.sustained.summary.time_to_first_throttle_s"]),
        energy_j=_scaled(doc["$.energy.mj_per_inference"], J_PER_MJ),
        energy_uncertainty_j=_scaled(doc["$.energy.uncertainty_mj"], J_PER_MJ),
        energy_source=str(doc["$.energy.source"] or "estimated"),
        sustained_windows=_windows(doc["$.sustained.windows"]),
        sustained_energy_j=_scaled(doc["$.sustained.summary.energy_mj_per_inference"], J_PER_MJ),
        placement_source=placement_source,
        latency_source=str(doc["$.provenance.latency"] or "measured"),
        generation_ttft_s=_scaled(doc["$.generation.ttft_ms.median"], 1 / MS_PER_S),
        generation_decode_tokens_per_s=_number(doc["$.generation.decode_tokens_per_s.median"]),
        slowest_ops=_slowest_ops(doc["$.ops"]),
        op_profiled_runs=_profiled_runs(doc["$.ops"]),
    )
