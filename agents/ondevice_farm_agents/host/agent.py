"""The host as a device: ONNX Runtime on this machine, measured for real.

Settings it reads from `AgentSettings.extra`: the CUDA ones (`CudaOptions`), and
`host_telemetry_root`, the directory whose `sys/` a sustained run reads CPU frequencies, thermal
zones and RAPL from, and the timed runs' energy its RAPL counters (default `/`; a container that
mounts the host's /sys elsewhere points here, as node_exporter's `--path.sysfs` does;
$FARM_AGENT_HOST_TELEMETRY_ROOT at the CLI), and the `host_energy_*` ones (`HostEnergySettings`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.analysis.profile_runs import profiled_run_count, record_profile
from ondevice_farm.errors import DeviceError, UsageError
from ondevice_farm_agents.base import (
    WARM_LOAD_SAME_PROCESS,
    AgentSettings,
    DeviceAgent,
    DeviceRun,
    DeviceUnit,
    Health,
    RunRequest,
    SustainedTrace,
)
from ondevice_farm_agents.host.cuda import CudaOptions, cuda_availability
from ondevice_farm_agents.host.energy import HostEnergyMeter, HostEnergySettings
from ondevice_farm_agents.host.memory import PeakMemory
from ondevice_farm_agents.host.sustained import run_sustained
from ondevice_farm_agents.host.telemetry import HostTelemetry
from ondevice_farm_agents.runtimes import SESSION_RUNTIMES

NS_PER_MS = 1e6


@contextlib.contextmanager
def pinned(cpus: tuple[int, ...] | None) -> Iterator[None]:
    """The calling thread pinned to `cpus` while the block runs (threads it starts inherit it)."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as exc:
        raise UsageError(f"cannot pin to CPUs {','.join(map(str, cpus))}: {exc.strerror}") from None
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


#: `AgentSettings.extra` key: where the telemetry's `sys/` tree is (see the module docstring)
TELEMETRY_ROOT = "host_telemetry_root"
DEFAULT_TELEMETRY_ROOT = "/"
CUDA_PROFILE = "host-cuda"
#: the script one repeat runs in, a fresh process (see its docstring)
SESSION_SCRIPT = Path(__file__).resolve().parent / "session.py"


def _providers_here() -> list[str]:
    import onnxruntime as ort

    return list(ort.get_available_providers())


def session_environment(settings: AgentSettings) -> dict[str, str]:
    """A session process's environment: this process's, with OMP_NUM_THREADS as the user had it
    rather than the 1 Ray gives its workers (measured here: a 46 µs-per-token decode 3.4% slower
    with it)."""
    env = dict(os.environ)
    if settings.session_omp_num_threads is None:
        env.pop("OMP_NUM_THREADS", None)
    else:
        env["OMP_NUM_THREADS"] = settings.session_omp_num_threads
    return env


class HostAgent(DeviceAgent):
    platform = "host"

    def __init__(self, settings: AgentSettings) -> None:
        super().__init__(settings)
        #: profile -> why no unit of it is here (filled by `discover`)
        self.absent: dict[str, str] = {}
        self._energy = HostEnergySettings.from_extra(settings.extra)
        self._telemetry_root = Path(settings.extra.get(TELEMETRY_ROOT, DEFAULT_TELEMETRY_ROOT))

    def discover(self) -> list[DeviceUnit]:
        import onnxruntime as ort

        serial = socket.gethostname()
        props = {"device": "cpu", "onnxruntime": ort.__version__, "cpus": str(os.cpu_count() or 0)}
        units = [DeviceUnit(profile="host-cpu", serial=serial, platform=self.platform, properties=props)]
        self.absent.pop(CUDA_PROFILE, None)
        if CUDA_PROFILE in self.settings.profiles:
            cuda = cuda_availability(self._cuda_options())
            if cuda.available:
                units.append(
                    DeviceUnit(
                        CUDA_PROFILE,
                        serial,
                        self.platform,
                        {**props, **(cuda.details or {}), "device": "cuda"},
                    )
                )
            else:
                self.absent[CUDA_PROFILE] = cuda.reason
        return units

    def absences(self) -> list[str]:
        """`<profile>: absent (<reason>)` for each host profile `discover` found no unit of."""
        return [f"{profile}: absent ({reason})" for profile, reason in self.absent.items()]

    def _cuda_options(self) -> CudaOptions:
        return CudaOptions.from_extra(self.settings.extra)

    def prepare(self, unit: DeviceUnit, request: RunRequest) -> None:
        if not request.artifact.exists():
            raise DeviceError(f"{unit.name}: artifact {request.artifact} is missing from the store")

    def health(self, unit: DeviceUnit) -> Health:
        return Health(up=True)

    def _options(self, request: RunRequest, profile_dir: Path | None) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        if request.intra_op_threads:
            options.intra_op_num_threads = request.intra_op_threads
        elif request.cpu_affinity:
            # ORT's default pool pins each worker to a core of its own choosing, outside the mask
            options.intra_op_num_threads = len(request.cpu_affinity)
        if request.allow_spinning is not None:
            value = "1" if request.allow_spinning else "0"
            options.add_session_config_entry("session.intra_op.allow_spinning", value)
        if profile_dir is not None:
            options.enable_profiling = True
            options.profile_file_prefix = str(profile_dir / "profile")
        return options

    def _session(self, request: RunRequest, profile_dir: Path | None = None) -> Any:
        import onnxruntime as ort

        providers = request.target.ort_providers()
        if providers[0] not in _providers_here():
            raise UsageError(f"{request.target} needs {providers[0]}, which this host's onnxruntime lacks")
        try:
            return ort.InferenceSession(
                str(request.artifact), self._options(request, profile_dir), providers=providers
            )
        except Exception as exc:
            raise DeviceError(f"onnxruntime could not load the model: {str(exc).splitlines()[0]}") from None

    def run(self, unit: DeviceUnit, request: RunRequest) -> DeviceRun:
        """The job in this process; a cancel (`DeviceAgent.cancel`) sets ONNX Runtime's terminate
        flag on the job's RunOptions, which ends the inference in flight and every later one."""
        import onnxruntime as ort

        run_options = ort.RunOptions()
        with (
            self.cancellation.stoppable(unit.serial, lambda: setattr(run_options, "terminate", True)),
            pinned(request.cpu_affinity),
        ):
            try:
                return self._run(unit, request, run_options)
            except Exception:
                self.cancellation.check(unit.serial)  # terminated: say why, not ORT's "Exiting ..."
                raise

    def _run(self, unit: DeviceUnit, request: RunRequest, run_options: Any) -> DeviceRun:
        if request.target.runtime in SESSION_RUNTIMES:  # in a Python session: host/edge_run.py
            from ondevice_farm_agents.host.edge_run import run_edge

            return run_edge(
                request, self._energy, self._telemetry_root, lambda: self.cancellation.check(unit.serial)
            )
        if request.target.runtime != "ort":
            raise UsageError(f"{unit.profile} runs ONNX Runtime targets only, not {request.target}")
        if request.generation is not None:  # an ONNX Runtime GenAI folder, in a process of its own
            from ondevice_farm_agents.host.generate import run_generation

            return run_generation(request, functools.partial(self._process, unit), unit.name)
        if request.target.backend == "cuda":
            from ondevice_farm_agents.host.cuda_run import run_cuda

            return run_cuda(
                request, self._cuda_options(), self._options, f"onnxruntime-python {self._ort_version()}"
            )
        names: list[str]
        with PeakMemory() as peak:
            start = time.perf_counter_ns()
            session = self._session(request)
            load_ns = time.perf_counter_ns() - start
            names = [o.name for o in session.get_outputs()]
            start = time.perf_counter_ns()
            first = session.run(names, request.inputs, run_options)
            first_ns = time.perf_counter_ns() - start
            for _ in range(request.warmup):
                session.run(names, request.inputs, run_options)
            # the idle window (where RAPL is readable) comes before the timed runs, the load after
            with HostEnergyMeter(self._telemetry_root, self._energy) as meter:
                samples: list[float] = []
                for _ in range(request.runs):
                    start = time.perf_counter_ns()
                    session.run(names, request.inputs, run_options)
                    samples.append((time.perf_counter_ns() - start) / NS_PER_MS)
                energy = meter.loaded(
                    functools.partial(session.run, names, request.inputs, run_options), request.runs
                )
            sustained = self._sustained(session, names, request, run_options)
        del session
        # a second session in the same process: what a warm start (caches, allocator, page cache) costs
        start = time.perf_counter_ns()
        warm = self._session(request)
        warm_load_ns = time.perf_counter_ns() - start
        del warm
        run = DeviceRun(
            load_ms=load_ns / NS_PER_MS,
            first_inference_ms=first_ns / NS_PER_MS,
            samples_ms=samples,
            outputs={n: np.asarray(v) for n, v in zip(names, first, strict=True)},
            peak_memory_bytes=peak.bytes,
            runner=f"onnxruntime-python {self._ort_version()}",
            warm_load_ms=warm_load_ns / NS_PER_MS,
            warm_load_method=WARM_LOAD_SAME_PROCESS,
            sustained=sustained,
            peak_memory_kind="rss_delta",
            energy=energy,
        )
        if request.profile_ops:
            self._profile(request, names, run, run_options)
        return run

    def _sustained(
        self, session: Any, names: list[str], request: RunRequest, run_options: Any
    ) -> SustainedTrace | None:
        if request.sustained_s <= 0:
            return None
        telemetry = HostTelemetry(self._telemetry_root)
        return run_sustained(
            lambda: session.run(names, request.inputs, run_options),
            request.sustained_s,
            request.sustained_window_s,
            telemetry.read,
            unavailable=telemetry.unavailable(),
        )

    def measure_session(self, unit: DeviceUnit, request: RunRequest) -> list[float]:
        """A repeat in a fresh process (agents/ondevice_farm_agents/host/session.py): its own thread placement
        and
        allocator state, which one long-lived process would share across every repeat."""
        if request.target.backend == "cuda":
            return super().measure_session(unit, request)
        if request.target.runtime in SESSION_RUNTIMES:
            from ondevice_farm_agents.host.edge_run import measure_edge_session

            return measure_edge_session(request, functools.partial(self._process, unit), unit.name)
        if request.generation is not None:
            from ondevice_farm_agents.host.generate import measure_generation_session

            return measure_generation_session(request, functools.partial(self._process, unit), unit.name)
        with tempfile.TemporaryDirectory(prefix="farm-session-") as tmp:
            inputs = Path(tmp) / "inputs.npz"
            arrays: dict[str, Any] = dict(request.inputs)
            np.savez(inputs, **arrays)
            spec = {
                "model": str(request.artifact),
                "providers": request.target.ort_providers(),
                "inputs": str(inputs),
                "warmup": request.warmup,
                "runs": request.runs,
                "threads": request.intra_op_threads,
                "affinity": list(request.cpu_affinity) if request.cpu_affinity else None,
                "spinning": request.allow_spinning,
            }
            stdout, stderr, returncode = self._session_process(unit, spec, request.timeout_s)
        if returncode != 0:
            self.cancellation.check(unit.serial)  # killed by a cancel
            reason = (stderr.strip().splitlines() or ["no message"])[-1]
            raise DeviceError(f"{unit.name}: a repeat's session failed: {reason}")
        return [float(v) for v in json.loads(stdout)["samples_ms"]]

    def session_controls(self, unit: DeviceUnit, request: RunRequest) -> dict[str, str]:
        """Threads and spinning are session options; affinity pins the session's process (a repeat)
        or, for the job's first session in this process, the calling thread while it runs, which
        ONNX Runtime's threads inherit when the session creates them; priority is this thread's
        nice value, which ONNX Runtime's threads and a repeat's process inherit."""
        if request.target.backend == "cuda":
            return super().session_controls(unit, request)
        if request.target.runtime in SESSION_RUNTIMES:
            from ondevice_farm_agents.host.edge_run import edge_controls

            return edge_controls(request)
        return {
            "threads": (
                str(request.intra_op_threads)
                if request.intra_op_threads
                else f"{len(request.cpu_affinity)} (one per pinned CPU)"
                if request.cpu_affinity
                else "runtime default"
            ),
            "affinity": ",".join(map(str, request.cpu_affinity)) if request.cpu_affinity else "not pinned",
            "spinning": (
                "runtime default"
                if request.allow_spinning is None
                else ("on" if request.allow_spinning else "off")
            ),
            # a Ray worker runs at nice 15 unless told otherwise (farm/ondevice_farm/controller/actor.py): the
            # measurement's priority, which decides who preempts it, is part of its conditions
            "priority": f"nice {os.getpriority(os.PRIO_PROCESS, 0)}",
        }

    def _session_process(
        self, unit: DeviceUnit, spec: dict[str, Any], timeout_s: float
    ) -> tuple[str, str, int]:
        """Run session.py on `spec`; a cancel kills it (by its pid, the process we started). Told
        this pid, it dies with this process however it dies (its death signal is bound to the
        thread that starts it, which `_process` keeps waiting for it)."""
        argv = [sys.executable, str(SESSION_SCRIPT), str(os.getpid())]
        return self._process(unit, argv, json.dumps(spec), timeout_s)

    def _process(
        self, unit: DeviceUnit, argv: list[str], stdin: str, timeout_s: float
    ) -> tuple[str, str, int]:
        """A session's process fed `stdin`; a cancel kills it (by its pid, the process we started)."""
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=session_environment(self.settings),
        )
        with self.cancellation.stoppable(unit.serial, process.kill):
            try:
                stdout, stderr = process.communicate(stdin, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
                raise DeviceError(f"{unit.name}: a session took over {timeout_s:.0f} s") from None
        if process.returncode != 0:
            self.cancellation.check(unit.serial)  # killed by a cancel
        return stdout, stderr, process.returncode

    def _profile(self, request: RunRequest, names: list[str], run: DeviceRun, run_options: Any) -> None:
        with tempfile.TemporaryDirectory(prefix="farm-profile-") as tmp:
            session = self._session(request, Path(tmp))
            for _ in range(profiled_run_count(request.runs)):
                session.run(names, request.inputs, run_options)
            events: list[dict[str, Any]] = json.loads(Path(session.end_profiling()).read_text())
        record_profile(run, events)

    @staticmethod
    def _ort_version() -> str:
        import onnxruntime as ort

        return str(ort.__version__)
