"""Two of the ways a job runs on a unit (the native runner is in `native_runner`), each turning
what the device wrote into a `DeviceRun`.

`FarmRunner`: the farm's own `farm_runner.py` under the device's python3 (Linux boards,
Termux): real samples and output tensors. `PerfTestRunner`: stock `onnxruntime_perf_test`
(the fallback on phones): timings as it prints them, no outputs (an empty dict, never made-up
ones), the per-node trace from `-p`, and a probe run with CPU fallback disabled that tells
whether every node can run on the accelerator.
"""

from __future__ import annotations

import json
import math
import posixpath
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.analysis.profile_runs import profiled_run_count, record_profile
from ondevice_farm.errors import DeviceError
from ondevice_farm_agents.android import perf_test
from ondevice_farm_agents.android.device_paths import q
from ondevice_farm_agents.android.jobs import run_detached
from ondevice_farm_agents.android.transport import AdbConnection
from ondevice_farm_agents.base import WARM_LOAD_SAME_PROCESS, WARM_LOAD_SECOND_PROCESS, DeviceRun, RunRequest

FARM_RUNNER_NAME = "farm_runner.py"
PROFILE_PREFIX = "profile"
#: timed runs of the second perf_test that measures the warm load (it takes no zero)
WARM_LOAD_RUNS = 1


@dataclass(frozen=True)
class StagedJob:
    """Device paths of what `prepare` pushed for one job."""

    model: str
    inputs: str = ""
    runner_script: str = ""
    test_data: tuple[str, ...] = ()
    #: the native runner, its ONNX Runtime library, and (graph input name, .npy path) per input
    runner_binary: str = ""
    runtime_library: str = ""
    input_files: tuple[tuple[str, str], ...] = ()
    #: the model's external data files, relative to it (beside `model` on the unit)
    model_data: tuple[str, ...] = ()
    #: a session runtime's job: the runtime's session module, beside `runner_script`
    session_module: str = ""


def _number(data: dict[str, Any], key: str) -> float:
    value = data.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise DeviceError(f"the device runner's result has no valid {key!r}")
    return float(value)


def _optional_number(data: dict[str, Any], key: str) -> float | None:
    return _number(data, key) if key in data else None


def _attach_profile(run: DeviceRun, profile_json: Path) -> None:
    """Per-op table from the warm profiled runs: the first (cold) run is left out, as on the host."""
    events = json.loads(profile_json.read_text())
    if not isinstance(events, list):
        raise DeviceError("the profile from the device is not a list of trace events")
    record_profile(run, events)


class FarmRunner:
    def __init__(self, conn: AdbConnection, python: str) -> None:
        self.conn = conn
        self.python = python

    def run(self, staged: StagedJob, request: RunRequest, job_dir: str) -> DeviceRun:
        args = [
            self.python,
            staged.runner_script,
            "--model",
            staged.model,
            "--inputs",
            staged.inputs,
            "--out",
            job_dir,
            "--warmup",
            str(request.warmup),
            "--runs",
            str(request.runs),
        ]
        for provider in request.target.ort_providers():
            args += ["--provider", provider]
        if request.intra_op_threads:
            args += ["--threads", str(request.intra_op_threads)]
        if request.profile_ops:
            args.append("--profile")
        result = run_detached(self.conn, job_dir, " ".join(q(a) for a in args), request.timeout_s)
        if result.exit_code != 0:
            raise DeviceError(f"{self.conn.serial}: the farm runner failed: {result.output.strip()[-500:]}")
        with tempfile.TemporaryDirectory(prefix="farm-android-") as tmp:
            local = Path(tmp)
            run = read_result(self.conn, job_dir, local, "farm_runner", "onnxruntime")
            if request.profile_ops:
                self.conn.pull(f"{job_dir}/profile.json", local / "profile.json")
                _attach_profile(run, local / "profile.json")
        return run


def read_result(
    conn: AdbConnection, job_dir: str, local: Path, script: str, runtime: str, detail: str = ""
) -> DeviceRun:
    """The `DeviceRun` of a device script's `result.json` and `outputs.npz` (farm_runner.py's
    format, which edge_runner.py writes too), pulled into `local`. The runner reads
    `script (runtime<detail>)`, `runtime` the result's own where it names one."""
    conn.pull(f"{job_dir}/result.json", local / "result.json")
    conn.pull(f"{job_dir}/outputs.npz", local / "outputs.npz")
    data = json.loads((local / "result.json").read_text())
    if not isinstance(data, dict):
        raise DeviceError("the device runner's result is not a JSON object")
    samples = data.get("samples_ms")
    if not isinstance(samples, list) or not all(isinstance(s, int | float) for s in samples):
        raise DeviceError("the device runner's result has no valid 'samples_ms'")
    # allow_pickle=False: nothing from the device is ever executed on the host.
    with np.load(local / "outputs.npz", allow_pickle=False) as saved:
        outputs = {name: saved[name] for name in saved.files}
    peak = data.get("peak_memory_bytes")
    # absent from a result.json written by a farm_runner.py older than the warm load
    warm_load_ms = _optional_number(data, "warm_load_ms")
    return DeviceRun(
        load_ms=_number(data, "load_ms"),
        first_inference_ms=_number(data, "first_inference_ms"),
        samples_ms=[float(s) for s in samples],
        outputs=outputs,
        peak_memory_bytes=int(peak) if isinstance(peak, int) else None,
        runner=f"{script} ({data.get('runtime', runtime)}{detail})",
        warm_load_ms=warm_load_ms,
        warm_load_method=WARM_LOAD_SAME_PROCESS if warm_load_ms is not None else "",
        # the runner process's VmHWM (ru_maxrss), interpreter and runtime included
        peak_memory_kind="rss_peak",
    )


class PerfTestRunner:
    def __init__(self, conn: AdbConnection, binary: str, options: list[str]) -> None:
        self.conn = conn
        self.binary = binary
        self.options = options
        # A shared build's perf_test finds libonnxruntime.so beside it only through the loader path.
        self._env = f"LD_LIBRARY_PATH={q(posixpath.dirname(binary) or '.')}"

    def _line(self, argv: list[str]) -> str:
        return " ".join([self._env, *(q(a) for a in argv)])

    def _stage(self, staged: StagedJob, job_dir: str) -> str:
        """perf_test reads inputs from test_data_set_0 next to the model: link both in."""
        links = [
            f"mkdir -p {q(job_dir)}/test_data_set_0",
            f"ln -sf {q(staged.model)} {q(job_dir)}/model.onnx",
        ]
        # ORT finds external data beside the path it was given, the link, not what it points to
        model_dir = posixpath.dirname(staged.model)
        for name in staged.model_data:
            target = f"{job_dir}/{name}"
            links += [
                f"mkdir -p {q(posixpath.dirname(target))}",
                f"ln -sf {q(model_dir + '/' + name)} {q(target)}",
            ]
        links += [
            f"ln -sf {q(path)} {q(job_dir)}/test_data_set_0/input_{i}.pb"
            for i, path in enumerate(staged.test_data)
        ]
        result = self.conn.shell(" && ".join(links))
        if not result.ok:
            raise DeviceError(f"{self.conn.serial}: cannot stage the job: {result.output.strip()}")
        return f"{job_dir}/model.onnx"

    def _perf_test(self, job_dir: str, request: RunRequest, argv: list[str]) -> str:
        result = run_detached(self.conn, job_dir, self._line(argv), request.timeout_s)
        if result.exit_code != 0:
            raise DeviceError(
                f"{self.conn.serial}: onnxruntime_perf_test failed: {result.output.strip()[-500:]}"
            )
        return result.output

    def _warm_load(
        self, job_dir: str, request: RunRequest, argv: list[str], notes: list[str]
    ) -> float | None:
        """perf_test makes one session per process, so a warm load is a second perf_test started
        right after the first: its session creation time, read from the same line. A failure
        here costs the warm figure only, never the measurements already taken."""
        result = run_detached(self.conn, job_dir, self._line(argv), request.timeout_s)
        warm = perf_test.parse_output(result.output) if result.exit_code == 0 else None
        if warm is None or warm.session_creation_ms is None:
            notes.append(
                "no warm load: the second onnxruntime_perf_test "
                + (f"exited with {result.exit_code}" if warm is None else "printed no session creation time")
            )
            return None
        notes.append(
            f"warm load: a second onnxruntime_perf_test process right after the first ({WARM_LOAD_RUNS} "
            "timed run): the OS file cache and any on-disk compile cache warm, in-process caches cold"
        )
        return warm.session_creation_ms

    def run(self, staged: StagedJob, request: RunRequest, job_dir: str) -> DeviceRun:
        model = self._stage(staged, job_dir)

        def argv(runs: int, **extra: Any) -> list[str]:
            return perf_test.command_line(
                self.binary,
                model,
                request.target,
                runs,
                options=self.options,
                threads=request.intra_op_threads,
                allow_spinning=request.allow_spinning,
                **extra,
            )

        summary = perf_test.parse_output(self._perf_test(job_dir, request, argv(request.runs)))
        if summary.session_creation_ms is None or summary.average_ms is None:
            raise DeviceError(f"{self.conn.serial}: onnxruntime_perf_test printed no timings")
        notes = [
            "onnxruntime_perf_test prints percentiles, not per-run samples: std, cv and samples are absent",
            # perf_test has no warm-up count: it makes one untimed run of its own before timing.
            f"warm-up: onnxruntime_perf_test's own single untimed run (it takes no count; "
            f"{request.warmup} were asked for)",
            "no output tensors: onnxruntime_perf_test does not return them, so nothing is compared",
        ]
        warm_load_ms = self._warm_load(job_dir, request, argv(WARM_LOAD_RUNS), notes)
        run = DeviceRun(
            load_ms=summary.session_creation_ms,
            first_inference_ms=summary.first_inference_ms
            if summary.first_inference_ms is not None
            else math.nan,
            samples_ms=[],
            outputs={},
            peak_memory_bytes=summary.peak_working_set_bytes,
            runner=f"onnxruntime_perf_test ({self.binary})",
            latency_summary_ms={**summary.latency_ms, "mean": summary.average_ms},
            notes=notes,
            percentile_method="onnxruntime_perf_test's own percentiles of its timed runs",
            peak_memory_kind="rss_peak",
            warm_load_ms=warm_load_ms,
            warm_load_method=WARM_LOAD_SECOND_PROCESS if warm_load_ms is not None else "",
        )
        if request.profile_ops:
            # As many profiled runs as the host makes, so the cold first one can be left out.
            profiled = profiled_run_count(request.runs)
            self._perf_test(job_dir, request, argv(profiled, profile_prefix=f"{job_dir}/{PROFILE_PREFIX}"))
            found = self.conn.shell(f"ls {q(job_dir)}/{PROFILE_PREFIX}*.json")
            paths = found.output.split()
            if found.ok and paths:
                with tempfile.TemporaryDirectory(prefix="farm-android-") as tmp:
                    self.conn.pull(paths[-1], Path(tmp) / "profile.json")
                    _attach_profile(run, Path(tmp) / "profile.json")
        if request.target.is_accelerator:
            probe = run_detached(
                self.conn, job_dir, self._line(argv(1, disable_cpu_fallback=True)), request.timeout_s
            )
            run.notes.append(
                "every node runs on the accelerator (CPU fallback disabled: the probe passed)"
                if probe.exit_code == 0
                else f"some nodes need the CPU: with CPU fallback disabled, perf_test failed: "
                f"{probe.output.strip().splitlines()[-1][:300] if probe.output.strip() else probe.exit_code}"
            )
        return run
