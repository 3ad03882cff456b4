"""A session runtime's job on the host (`ondevice_farm_agents.runtimes`), measured the way the ONNX
Runtime job is.

Same phases and definitions as `HostAgent._run`: the session's load timed, one untimed first
inference (timed on its own), `warmup` untimed runs, `runs` timed runs (energy around them where
RAPL can tell), an optional sustained phase, then a second load in the same process (warm load).
Peak memory is the RSS high-water mark above the resident set before the load. A sample is one
inference with NumPy in and out (the runtime's session module). The per-op profile is the runtime's
own profiler's, where it has one; a runtime without one says so (`edge_profile`).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ondevice_farm.errors import DeviceError, UsageError, install_hint
from ondevice_farm_agents.base import WARM_LOAD_SAME_PROCESS, DeviceRun, RunRequest, SustainedTrace
from ondevice_farm_agents.host.edge_profile import profile_ops
from ondevice_farm_agents.host.energy import HostEnergyMeter, HostEnergySettings
from ondevice_farm_agents.host.memory import PeakMemory
from ondevice_farm_agents.host.sustained import run_sustained
from ondevice_farm_agents.host.telemetry import HostTelemetry
from ondevice_farm_agents.runtimes import session_runtime
from ondevice_farm_agents.runtimes.spec import (
    EdgeSession,
    ProfiledSession,
    SessionRuntime,
    default_threads,
    open_profiled_session,
    open_session,
)

NS_PER_MS = 1e6
#: a repeat's process: `python -m` this module (agents/ondevice_farm_agents/host/edge_session.py)
EDGE_SESSION_MODULE = "ondevice_farm_agents.host.edge_session"
#: what a loader gives: a session, or a profiled one
_Session = TypeVar("_Session", bound=EdgeSession)
SAMPLE_NOTE = (
    "latency: one sample is one inference with NumPy inputs in and NumPy outputs out (copied), "
    "as ONNX Runtime's session.run is timed"
)


def runtime_of(request: RunRequest) -> SessionRuntime:
    """The registry's runtime of the request's target; a UsageError where none runs in a session."""
    runtime = session_runtime(request.target.runtime)
    if runtime is None:
        raise UsageError(f"no session runtime runs {request.target}")
    return runtime


def input_order(request: RunRequest) -> list[str]:
    """The inputs' names in the model's argument order: the compile's I/O map, else the request's."""
    if request.io_names is not None:
        return [f.onnx_name for f in request.io_names.inputs]
    return list(request.inputs)


def feature_names(request: RunRequest) -> tuple[list[str], list[str]] | None:
    """The artifact's own input and output names in the model's order, where the compile recorded them."""
    if request.io_names is None:
        return None
    return [f.feature_name for f in request.io_names.inputs], [
        f.feature_name for f in request.io_names.outputs
    ]


def output_names(request: RunRequest, count: int) -> list[str]:
    """The outputs' names as the reference has them (`output`, `output_0`, ...)."""
    if request.io_names is not None and len(request.io_names.outputs) == count:
        return [f.onnx_name for f in request.io_names.outputs]
    return ["output"] if count == 1 else [f"output_{i}" for i in range(count)]


def check_runtime(request: RunRequest) -> None:
    """Import the target's runtime (before anything is timed: its import is no model's load); a
    UsageError with the install hint where it is not installed here."""
    runtime = runtime_of(request)
    try:
        for name in runtime.imported_first:
            importlib.import_module(name)
    except ImportError as exc:
        raise UsageError(
            f"{request.target} needs {runtime.package} on the host ({exc})", hint=install_hint(runtime.extra)
        ) from None


def load(request: RunRequest) -> EdgeSession:
    return _loaded(request, open_session)


def load_profiled(request: RunRequest) -> ProfiledSession:
    """A session with the runtime's per-op profiling on (a runtime that profiles)."""
    return _loaded(request, open_profiled_session)


def _loaded(request: RunRequest, opener: Callable[..., _Session]) -> _Session:
    runtime = runtime_of(request)
    inputs = [request.inputs[name] for name in input_order(request)]
    try:
        return opener(
            runtime,
            request.target.backend,
            request.artifact,
            inputs,
            request.intra_op_threads or (len(request.cpu_affinity) if request.cpu_affinity else None),
            feature_names(request),
        )
    except Exception as exc:  # the runtimes raise RuntimeError, ValueError, their own status errors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DeviceError(f"{request.target.runtime} could not load the model: {first}") from None


def run_edge(
    request: RunRequest,
    energy: HostEnergySettings,
    telemetry_root: Path,
    check_cancelled: Callable[[], None],
) -> DeviceRun:
    """The job in this process; `check_cancelled` raises once the job was cancelled (the runtimes
    have no terminate flag: the job stops between two inferences)."""

    def infer_checked(session: EdgeSession) -> list[np.ndarray]:
        check_cancelled()
        return session.infer()

    check_runtime(request)
    with PeakMemory() as peak:
        start = time.perf_counter_ns()
        session = load(request)
        load_ns = time.perf_counter_ns() - start
        start = time.perf_counter_ns()
        first = session.infer()
        first_ns = time.perf_counter_ns() - start
        for _ in range(request.warmup):
            infer_checked(session)
        with HostEnergyMeter(telemetry_root, energy) as meter:
            samples: list[float] = []
            for _ in range(request.runs):
                check_cancelled()
                start = time.perf_counter_ns()
                session.infer()
                samples.append((time.perf_counter_ns() - start) / NS_PER_MS)
            measured_energy = meter.loaded(functools.partial(infer_checked, session), request.runs)
        sustained = _sustained(session, request, telemetry_root)
    runner = session.runner
    del session
    start = time.perf_counter_ns()
    warm = load(request)
    warm_load_ns = time.perf_counter_ns() - start
    del warm
    names = output_names(request, len(first))
    run = DeviceRun(
        load_ms=load_ns / NS_PER_MS,
        first_inference_ms=first_ns / NS_PER_MS,
        samples_ms=samples,
        outputs=dict(zip(names, first, strict=True)),
        peak_memory_bytes=peak.bytes,
        runner=f"{runner} ({request.target.backend})",
        notes=[SAMPLE_NOTE],
        warm_load_ms=warm_load_ns / NS_PER_MS,
        warm_load_method=WARM_LOAD_SAME_PROCESS,
        sustained=sustained,
        peak_memory_kind="rss_delta",
        energy=measured_energy,
    )
    if request.profile_ops:
        profile_ops(runtime_of(request), request, run, functools.partial(load_profiled, request))
    return run


def _sustained(session: EdgeSession, request: RunRequest, telemetry_root: Path) -> SustainedTrace | None:
    if request.sustained_s <= 0:
        return None
    telemetry = HostTelemetry(telemetry_root)
    return run_sustained(
        session.infer,
        request.sustained_s,
        request.sustained_window_s,
        telemetry.read,
        unavailable=telemetry.unavailable(),
    )


def edge_controls(request: RunRequest) -> dict[str, str]:
    """The noise controls of an edge session, as `DeviceRun.controls` records them: a session
    runtime's thread pool is sized by the farm (each takes a thread count, nothing about spinning);
    affinity pins the job's thread (whose threads inherit it) or a repeat's process."""
    if request.intra_op_threads:
        threads = str(request.intra_op_threads)
    elif request.cpu_affinity:
        threads = f"{len(request.cpu_affinity)} (one per pinned CPU)"
    else:
        threads = f"{default_threads()} (one per CPU the process may run on)"
    return {
        "threads": threads,
        "affinity": ",".join(map(str, request.cpu_affinity)) if request.cpu_affinity else "not pinned",
        "spinning": "not controllable",
        # a Ray worker runs at nice 15 unless told otherwise: part of the measurement's conditions
        "priority": f"nice {os.getpriority(os.PRIO_PROCESS, 0)}",
    }


#: (argv, stdin, timeout_s) -> (stdout, stderr, returncode): the agent's way to run a session process
SessionProcess = Callable[[list[str], str, float], tuple[str, str, int]]


def measure_edge_session(request: RunRequest, run_process: SessionProcess, unit_name: str) -> list[float]:
    """A repeat in a fresh process (`python -m ondevice_farm_agents.host.edge_session PARENT_PID`),
    as ONNX Runtime's repeats run in session.py's: the timed samples after its own first inference
    and warm-up."""
    with tempfile.TemporaryDirectory(prefix="farm-session-") as tmp:
        inputs = Path(tmp) / "inputs.npz"
        arrays: dict[str, Any] = dict(request.inputs)
        np.savez(inputs, **arrays)
        names = feature_names(request)
        runtime = runtime_of(request)
        spec = {
            "session_module": str(runtime.session_module),
            "imports": list(runtime.imported_first),
            "backend": request.target.backend,
            "model": str(request.artifact),
            "inputs": str(inputs),
            "order": input_order(request),
            "features": {"inputs": names[0], "outputs": names[1]} if names else None,
            "warmup": request.warmup,
            "runs": request.runs,
            "threads": request.intra_op_threads,
            "affinity": list(request.cpu_affinity) if request.cpu_affinity else None,
        }
        argv = [sys.executable, "-m", EDGE_SESSION_MODULE, str(os.getpid())]
        stdout, stderr, returncode = run_process(argv, json.dumps(spec), request.timeout_s)
    if returncode != 0:
        reason = (stderr.strip().splitlines() or ["no message"])[-1]
        raise DeviceError(f"{unit_name}: a repeat's session failed: {reason}")
    return [float(v) for v in json.loads(stdout.strip().splitlines()[-1])["samples_ms"]]
