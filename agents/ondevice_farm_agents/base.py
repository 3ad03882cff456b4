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
from ondevice_farm.generate.trace import GenerationPlan
from ondevice_farm.measurement import (
    PROVENANCES,
    WARM_LOAD_COMPILED_AGAIN,
    WARM_LOAD_SAME_PROCESS,
    WARM_LOAD_SECOND_PROCESS,
    DeviceRun,
    EnergyEstimate,
    OpTiming,
    PairedRound,
    PairedTrace,
    SustainedTrace,
    SustainedWindow,
    TelemetrySample,
    Thermal,
)
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.targets import Target
from ondevice_farm_agents.cancel import Cancellation

#: with the measurement values, defined below every layer (farm/ondevice_farm/measurement.py) and re-exported
#: here for the agents, which build them
__all__ = [
    "DEFAULT_JOB_TIMEOUT_S",
    "PROVENANCES",
    "WARM_LOAD_COMPILED_AGAIN",
    "WARM_LOAD_SAME_PROCESS",
    "WARM_LOAD_SECOND_PROCESS",
    "AgentSettings",
    "DeviceAgent",
    "DeviceRun",
    "DeviceUnit",
    "EnergyEstimate",
    "Health",
    "OpTiming",
    "PairedPlan",
    "PairedRound",
    "PairedTrace",
    "RunRequest",
    "SustainedTrace",
    "SustainedWindow",
    "TelemetrySample",
    "Thermal",
]

DEFAULT_JOB_TIMEOUT_S = 600.0


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
    #: a generation job: `artifact` is an ONNX Runtime GenAI folder, generated from as planned
    #: (docs/generate.md); None: one fixed graph, run `runs` times
    generation: GenerationPlan | None = None


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
    #: OMP_NUM_THREADS as the user's own environment had it (None: not set). Ray sets it to 1 in
    #: its workers, the DeviceActor among them; a session process the agent starts gets the user's
    #: value back, so OpenMP/BLAS pools (onnxruntime-genai's, numpy's) size as in the user's app
    session_omp_num_threads: str | None = None
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
