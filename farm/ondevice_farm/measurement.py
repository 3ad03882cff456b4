"""What a unit measured: the value types that cross from the agents to the analysis and reports.

They sit below both: `agents/` fills them in (`ondevice_farm_agents.base` re-exports them for
the agents), `farm/ondevice_farm/analysis` and `farm/ondevice_farm/reports` read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ondevice_farm.generate.trace import GenerationTrace

#: how a figure was obtained (docs/results.md, "Provenance"): measured on the device; planned by
#: the runtime before running (MLComputePlan's preferred device); estimated from a plan's cost
#: weight; predicted on the host (the MIL executor); synthetic (the simulated agent)
PROVENANCES = ("measured", "planned", "estimated", "predicted", "synthetic")


@dataclass(frozen=True)
class OpTiming:
    """One node of the profiled pass, as the device reported it."""

    name: str
    op_type: str
    provider: str
    #: the mean over the profiled runs of the node's time in one run
    mean_us: float
    #: kernel events the profile held for it, over all its runs
    calls: int = 1
    #: how `mean_us` was obtained: "measured" (profiled), "estimated", "synthetic" (PROVENANCES)
    source: str = "measured"
    #: the median over the profiled runs of the node's time in one run: one slow run does not move
    #: it (None where the runner reports one figure per op: an estimate, a summary)
    median_us: float | None = None
    #: profiled runs `median_us` and `mean_us` are over (None: not known)
    runs: int | None = None

    @property
    def time_us(self) -> float:
        """The figure the op table ranks and shares by: the median where recorded, else the mean."""
        return self.median_us if self.median_us is not None else self.mean_us


@dataclass(frozen=True)
class Thermal:
    """A device's thermal reading; `status` is the platform's own word (e.g. `nominal`)."""

    status: str
    temperatures_c: dict[str, float] = field(default_factory=dict)
    battery_pct: float | None = None


@dataclass(frozen=True)
class TelemetrySample:
    """What the platform exposes about its silicon at one moment; empty where it exposes nothing.
    `energy_uj` is a cumulative counter (host RAPL), not a rate."""

    cpu_freq_mhz: dict[str, float] = field(default_factory=dict)
    temperatures_c: dict[str, float] = field(default_factory=dict)
    thermal_status: str | None = None
    energy_uj: float | None = None
    #: GPU devfreq device -> its current clock (Android: Mali, Adreno); empty where not exposed
    gpu_freq_mhz: dict[str, float] = field(default_factory=dict)


#: `warm_load_method`: a second session created in the process that made the first (host, the
#: native runner, the farm runner): page cache, allocator and the runtime's in-process caches warm
WARM_LOAD_SAME_PROCESS = "second session in the same process"
#: a second process started right after the first (onnxruntime_perf_test makes one session per
#: process): the OS file cache and any on-disk compile cache warm, in-process caches cold again
WARM_LOAD_SECOND_PROCESS = "second process"
#: FarmRunner (iOS): the compiled model loaded again while the first copy is loaded, no compile
WARM_LOAD_COMPILED_AGAIN = "compiled model loaded again in the same process"


@dataclass(frozen=True)
class SustainedWindow:
    """One window of a sustained run: its inferences' latencies and the telemetry at its end."""

    start_s: float
    end_s: float
    samples_ms: list[float]
    telemetry: TelemetrySample


@dataclass(frozen=True)
class SustainedTrace:
    """Inferences back to back for `duration_s`, cut into windows (all measured on the unit)."""

    duration_s: float
    window_s: float
    windows: list[SustainedWindow]
    #: telemetry just before the first inference of the sustained phase
    start: TelemetrySample
    #: what the platform's telemetry could not tell, e.g. "no cpufreq in sysfs"
    unavailable: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class EnergyEstimate:
    """Energy per inference where a unit can tell it, or why not (`absent`). Always an estimate:
    the whole device's draw under load minus its draw at idle (docs/results.md, "Energy")."""

    mj_per_inference: float | None = None
    #: mean power over the idle window before the timed runs, and over the timed runs
    baseline_mw: float | None = None
    active_mw: float | None = None
    #: one standard uncertainty of `mj_per_inference` (sample spread and sensor resolution)
    uncertainty_mj: float | None = None
    method: str = ""
    idle_samples: int = 0
    active_samples: int = 0
    active_s: float | None = None
    inferences: int = 0
    #: how the unit signs its battery current, e.g. "negative while discharging"
    sign_convention: str = ""
    #: why there is no figure (charging, no readable battery, a runner that does not sample)
    absent: str = ""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PairedRound:
    """One round: which model ran first ("AB" or "BA") and each session's timed samples."""

    order: str
    baseline_samples_ms: list[float]
    candidate_samples_ms: list[float]
    started_at: float
    finished_at: float


@dataclass(frozen=True)
class PairedTrace:
    """What a paired job measured beside the candidate's own run (`RunRequest.paired`)."""

    rounds: list[PairedRound]
    seed: int
    #: decided | max-rounds | budget
    stopped: str
    elapsed_s: float
    #: the noise controls each session ran under (`DeviceRun.controls` of the sessions)
    controls: dict[str, str] = field(default_factory=dict)


@dataclass
class DeviceRun:
    """What a unit measured. Times are in milliseconds, memory in bytes."""

    load_ms: float
    first_inference_ms: float
    samples_ms: list[float]
    outputs: dict[str, np.ndarray]
    ops: list[OpTiming] = field(default_factory=list)
    #: node name -> execution provider / compute device, where the runtime tells
    placement: dict[str, str] = field(default_factory=dict)
    peak_memory_bytes: int | None = None
    thermal_before: Thermal | None = None
    thermal_after: Thermal | None = None
    runner: str = ""
    #: where a runner reports only a summary (onnxruntime_perf_test prints percentiles, not
    #: samples): "min", "max", "mean", "p50", "p90", "p99", ... in milliseconds
    latency_summary_ms: dict[str, float] = field(default_factory=dict)
    #: the raw per-op trace (Chrome trace events) for reports and traces
    trace_events: list[dict[str, object]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: a second session load right after the first (caches warm); how, in `warm_load_method`
    warm_load_ms: float | None = None
    #: how `warm_load_ms` was obtained: WARM_LOAD_SAME_PROCESS or WARM_LOAD_SECOND_PROCESS
    warm_load_method: str = ""
    sustained: SustainedTrace | None = None
    #: energy per inference during the timed runs, or the reason there is none; None: not asked
    energy: EnergyEstimate | None = None
    #: how the latencies were obtained ("measured", or "synthetic" for the simulated agent)
    latency_source: str = "measured"
    #: how `placement` (and so the fallbacks) was obtained: "measured" where the runtime reports
    #: what ran where, "planned" where it reports where it would run an op (MLComputePlan)
    placement_source: str = "measured"
    #: per figure kind, how an estimate was derived (e.g. {"op_times": "mean_us = ..."})
    formulas: dict[str, str] = field(default_factory=dict)
    #: every session's timed samples, the first session's (`samples_ms`) first; filled by
    #: `ondevice_farm_agents.repeats.run_repeats` (an agent's own `run` measures one session)
    repeat_samples_ms: list[list[float]] = field(default_factory=list)
    #: how the runner computed the percentiles of `latency_summary_ms` where it gave no samples
    #: (with samples the farm computes them itself, numpy's "linear" method)
    percentile_method: str = ""
    #: what `peak_memory_bytes` measures on this platform: `rss_delta` (host: VmHWM above the
    #: resident set before the session), `rss_peak` (a whole runner process's VmHWM),
    #: `phys_footprint` (iOS), or "" where unknown
    peak_memory_kind: str = ""
    #: the noise controls the runner applied, as it recorded them: `threads` (intra-op count or
    #: "runtime default"), `affinity` (cores, "not pinned" or "not controllable"), `spinning`
    #: ("on", "off", "runtime default" or "not controllable")
    controls: dict[str, str] = field(default_factory=dict)
    #: the interleaved rounds of a paired job (`RunRequest.paired`), None otherwise
    paired: PairedTrace | None = None
    #: a generation job's timed generations (`RunRequest.generation`), None otherwise
    generation: GenerationTrace | None = None
