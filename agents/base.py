"""The interface between the controller and a platform, and the values that cross it.

A `DeviceAgent` serves every unit of one platform attached to this host. The controller
calls, per job: `prepare` (push what the job needs, cached by hash), `run` (load, first
inference, warm-up, timed runs, profiled pass, outputs), and between jobs `health`. From
another thread, `cancel` stops the job a unit runs now (its submission was cancelled or
abandoned).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np

from ondevice_farm.compile.io_names import IoNameMap
from ondevice_farm.config import (
    DEFAULT_REPEATS,
    DEFAULT_SUSTAINED_WINDOW_S,
    DEFAULT_TIMED_RUNS,
    DEFAULT_WARMUP_RUNS,
)
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.targets import Target
from ondevice_farm_agents.cancel import Cancellation

DEFAULT_JOB_TIMEOUT_S = 600.0
#: how a figure was obtained (docs/results.md, "Provenance"): measured on the device; planned by
#: the runtime before running (MLComputePlan's preferred device); estimated from a plan's cost
#: weight; predicted on the host (the MIL executor); synthetic (the simulated agent)
PROVENANCES = ("measured", "planned", "estimated", "predicted", "synthetic")


@dataclass(frozen=True)
class DeviceUnit:
    """One attached device: `profile` names its `device_profiles/` entry."""

    profile: str
    serial: str
    platform: str
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.profile}:{self.serial}"


@dataclass(frozen=True)
class RunRequest:
    """What a job asks a unit to do. `artifact` is a file or a `.mlpackage` directory.

    `repeats`: measurement sessions, each a fresh session (on the host a fresh process) with its
    own first inference, `warmup` untimed runs and `runs` timed runs; see `ondevice_farm_agents.repeats`.
    """

    artifact: Path
    artifact_sha256: str
    target: Target
    inputs: dict[str, np.ndarray]
    warmup: int = DEFAULT_WARMUP_RUNS
    runs: int = DEFAULT_TIMED_RUNS
    repeats: int = DEFAULT_REPEATS
    profile_ops: bool = True
    intra_op_threads: int | None = None
    timeout_s: float = DEFAULT_JOB_TIMEOUT_S
    #: after the timed runs, run back to back for this long (0: no sustained phase)
    sustained_s: float = 0.0
    sustained_window_s: float = DEFAULT_SUSTAINED_WINDOW_S
    #: ONNX name <-> the artifact's feature name (CoreML renames); None: the names are the ONNX ones
    io_names: IoNameMap | None = None
    #: CPU cores the measured sessions are pinned to (host: the session process; the native
    #: runner: `sched_setaffinity`); None: the OS places them. What was applied: `DeviceRun.controls`
    cpu_affinity: tuple[int, ...] | None = None
    #: ONNX Runtime's `session.intra_op.allow_spinning` (worker threads spin between ops); None:
    #: the runtime's default (on)
    allow_spinning: bool | None = None
    #: measure this request (the candidate, B) interleaved with a baseline (A) on the same unit
    paired: PairedPlan | None = None


@dataclass(frozen=True)
class PairedPlan:
    """Rounds of A and B on one unit, each a fresh measurement session, in an order drawn at
    random per round (Abedi & Brecht, "Conducting repeatable experiments in highly variable
    cloud computing environments", ICPE 2017: randomized multiple interleaved trials).

    `decided` gets the (A p50, B p50) pairs of the rounds so far after every round and says
    whether the verdict is reached (a sequential test valid under that looking); it is a plain
    module-level function or `functools.partial` of one, so it pickles to the unit's node."""

    baseline: RunRequest
    max_rounds: int
    budget_s: float
    seed: int
    decided: Callable[[list[tuple[float, float]]], bool] | None = None
    #: measure no fewer rounds than this before asking `decided`
    min_rounds: int = 3


@dataclass(frozen=True)
class OpTiming:
    """One node of the profiled pass, as the device reported it."""

    name: str
    op_type: str
    provider: str
    mean_us: float
    calls: int = 1
    #: how `mean_us` was obtained: "measured" (profiled), "estimated", "synthetic" (PROVENANCES)
    source: str = "measured"


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


@dataclass(frozen=True)
class AgentSettings:
    """How agents find their units; built at the CLI edge (from `FARM_*` and flags)."""

    profiles: dict[str, DeviceProfile] = field(default_factory=dict)
    #: `host:port` of Android units reached over TCP (wireless debugging, Linux boards)
    adb_tcp_addresses: tuple[str, ...] = ()
    #: scan USB for Android units (needs libusb and permissions)
    adb_usb: bool = False
    #: the RSA key adb uses; generated on first use when missing
    adb_key_path: Path | None = None
    #: per-call timeout for device I/O
    io_timeout_s: float = 30.0
    #: platform-specific settings that have no field yet, e.g. an iOS runner bundle id
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Health:
    up: bool
    thermal: Thermal | None = None
    reason: str = ""


class DeviceAgent(ABC):
    """One platform's way of finding units and running jobs on them."""

    platform: ClassVar[str]

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings
        #: which units' jobs were cancelled, and how to stop what they run (see `cancel`)
        self.cancellation = Cancellation()

    @abstractmethod
    def discover(self) -> list[DeviceUnit]:
        """The units attached now. Never raises for "none attached": returns []."""

    @abstractmethod
    def prepare(self, unit: DeviceUnit, request: RunRequest) -> None:
        """Push the artifact and inputs to the unit (skipped when already there)."""

    @abstractmethod
    def run(self, unit: DeviceUnit, request: RunRequest) -> DeviceRun:
        """Run the job and bring its measurements and outputs back."""

    def measure_session(self, unit: DeviceUnit, request: RunRequest) -> list[float]:
        """One more measurement session of a job (a repeat after the first): a fresh session's
        timed samples after its own first inference and warm-up. This default runs the whole job
        again without the profiled pass; platforms with a cheaper fresh session override it."""
        return self.run(unit, replace(request, profile_ops=False, repeats=1)).samples_ms

    def session_controls(self, unit: DeviceUnit, request: RunRequest) -> dict[str, str]:
        """The noise controls this agent's sessions of `request` run under, as `DeviceRun.controls`
        records them. This default controls nothing: platforms that pin or set threads override it."""
        return {
            "threads": str(request.intra_op_threads) if request.intra_op_threads else "runtime default",
            "affinity": "not controllable",
            "spinning": "not controllable",
        }

    @abstractmethod
    def health(self, unit: DeviceUnit) -> Health:
        """Whether the unit is reachable, and its thermal state."""

    def begin_job(self, unit: DeviceUnit) -> None:
        """A job starts on `unit` (before `prepare`): a cancel meant for the one before is forgotten."""
        self.cancellation.begin(unit.serial)

    def cancel(self, unit: DeviceUnit) -> None:
        """Stop the job `unit` runs now; called from another thread than `run`'s, while it runs.

        `run` (or `measure_session`) then raises `JobCancelledError` instead of returning. This
        marks the job cancelled, which the agent's loops notice at their next
        `self.cancellation.check(serial)`, and calls what the running job registered with
        `self.cancellation.stoppable(serial, stop)`: kill the session's process, the runner on a
        phone, end an app. An agent that registers nothing stops at its next check only."""
        self.cancellation.cancel(unit.serial)

    def absences(self) -> list[str]:
        """`<profile>: absent (<reason>)` for units this agent looked for and could not offer."""
        return []

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Agents without any keep the default."""
