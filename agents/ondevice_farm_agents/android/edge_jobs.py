"""A session runtime's jobs on an Android unit (`ondevice_farm_agents.runtimes`): what `prepare`
pushes, and `edge_runner.py`'s run under the unit's python3 turned into a `DeviceRun`.

Only a profile whose runner starts the unit's python3 (kind `farm-runner`: Linux boards, units
whose python3 has the runtime's package) runs them. The farm's native runner links ONNX Runtime
alone and onnxruntime_perf_test reads ONNX alone; no Android build of these runtimes can be made on
the farm's build machine (no NDK), so a profile of those kinds refuses the job with the build
recipe (docs/android.md) rather than run something else.

The measurement is the host's (`host/edge_run.py`), by the same code where it can be: the
runtime's session module is pushed beside the script and makes the session on the unit, the
imports done before the clock are the registry's `imported_first`, the profiled run count is
`profiled_run_count`, and a profiled session's dump from the unit is read by the runtime's own
profiler on the host (`host/edge_profile.py`), with what the compile left beside the artifact.
"""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.analysis.profile_runs import profiled_run_count
from ondevice_farm.errors import DeviceError, UsageError
from ondevice_farm_agents.android import edge_runner
from ondevice_farm_agents.android.device_paths import q
from ondevice_farm_agents.android.jobs import run_detached
from ondevice_farm_agents.android.push_cache import PushCache, describe
from ondevice_farm_agents.android.runners import StagedJob, read_result
from ondevice_farm_agents.android.transport import AdbConnection
from ondevice_farm_agents.base import DeviceRun, RunRequest
from ondevice_farm_agents.host.edge_profile import profile_ops
from ondevice_farm_agents.host.edge_run import (
    SAMPLE_NOTE,
    feature_names,
    input_order,
    output_names,
    runtime_of,
)
from ondevice_farm_agents.runtimes import SESSION_RUNTIMES
from ondevice_farm_agents.runtimes.spec import ProfiledSession

RUNNER_SCRIPT = Path(edge_runner.__file__)
#: the name a runtime's session module has on the unit, in its own hash's cache folder
SESSION_MODULE_NAME = "edge_runtimes.py"


def _build_recipe() -> str:
    """Where docs/android.md tells how the session runtimes get native Android runners, and what
    runs their jobs until then."""
    runtimes = list(SESSION_RUNTIMES.values())
    titles = " and ".join(r.title for r in runtimes)
    runners = ", ".join(f"{r.title}'s {r.android_runner}" for r in runtimes)
    return (
        f"docs/android.md, '{titles} on Android': a native runner is built with the NDK "
        f"({runners}); until then a unit whose python3 has "
        "the runtime runs these jobs with runner.kind: farm-runner"
    )


BUILD_RECIPE = _build_recipe()


class NoEdgeRunnerError(UsageError):
    """The unit's profile names a runner that cannot run a session runtime's programs."""

    default_hint = BUILD_RECIPE


def stage_edge(
    cache: PushCache, unit_name: str, request: RunRequest, *, runner_kind: str, python_kind: str
) -> StagedJob:
    """Push the program, the inputs, the runner script and the session module (content-addressed:
    unchanged files are not pushed again); refuse a runner kind other than `python_kind`."""
    if runner_kind != python_kind:
        raise NoEdgeRunnerError(
            f"{unit_name} cannot run {request.target}: its runner kind {runner_kind!r} runs ONNX "
            f"models only, and no Android build of {request.target.runtime} is in the farm yet"
        )
    if not request.artifact.is_file():
        raise DeviceError(f"{unit_name}: artifact {request.artifact} is not a file")
    with tempfile.TemporaryDirectory(prefix="farm-android-") as tmp:
        inputs = Path(tmp) / "inputs.npz"
        arrays: dict[str, Any] = dict(request.inputs)
        np.savez(inputs, **arrays)
        paths = cache.ensure(
            [
                describe(request.artifact, f"model{request.artifact.suffix}", request.artifact_sha256),
                describe(inputs),
                describe(RUNNER_SCRIPT),
                describe(runtime_of(request).session_module, SESSION_MODULE_NAME),
            ]
        )
    return StagedJob(model=paths[0], inputs=paths[1], runner_script=paths[2], session_module=paths[3])


class EdgeRunner:
    def __init__(self, conn: AdbConnection, python: str) -> None:
        self.conn = conn
        self.python = python

    def _argv(self, staged: StagedJob, request: RunRequest, job_dir: str) -> list[str]:
        target = request.target
        runtime = runtime_of(request)
        args = [self.python, staged.runner_script, "--session-module", staged.session_module]
        args += ["--backend", target.backend]
        args += ["--model", staged.model, "--inputs", staged.inputs, "--out", job_dir]
        args += ["--warmup", str(request.warmup), "--runs", str(request.runs)]
        for name in input_order(request):
            args += ["--input", name]
        names = feature_names(request)
        for flag, values in zip(("--feature-input", "--feature-output"), names or ([], []), strict=True):
            for value in values:
                args += [flag, value]
        for module in runtime.imported_first:
            args += ["--import", module]
        if request.intra_op_threads:
            args += ["--threads", str(request.intra_op_threads)]
        if request.profile_ops and runtime.profiles_ops:
            args += ["--profile-runs", str(profiled_run_count(request.runs))]
        return args

    def run(self, staged: StagedJob, request: RunRequest, job_dir: str) -> DeviceRun:
        target = request.target
        runtime = runtime_of(request)
        command = " ".join(q(a) for a in self._argv(staged, request, job_dir))
        result = run_detached(self.conn, job_dir, command, request.timeout_s)
        tail = result.output.strip()[-500:]
        if result.exit_code == edge_runner.MISSING_RUNTIME_EXIT:
            missing = tail.splitlines()[-1] if tail else f"edge_runner: {self.python} lacks {target.runtime}"
            install = f"pip install {runtime.pip_name} for the unit's {self.python}"
            raise DeviceError(f"{self.conn.serial}: {missing}", hint=f"{install}, or {BUILD_RECIPE}")
        if result.exit_code != 0:
            raise DeviceError(f"{self.conn.serial}: the edge runner failed: {tail}")
        with tempfile.TemporaryDirectory(prefix="farm-android-") as tmp:
            local = Path(tmp)
            run = read_result(self.conn, job_dir, local, "edge_runner", target.runtime, f", {target.backend}")
            # the script names outputs by position; the reference names them as the compile did
            ordered = [run.outputs[f"output_{i}"] for i in range(len(run.outputs))]
            run.outputs = dict(zip(output_names(request, len(ordered)), ordered, strict=True))
            run.notes.append(SAMPLE_NOTE)
            run.controls = _controls(request, json.loads((local / "result.json").read_text()))
            if request.profile_ops:
                profile_ops(runtime, request, run, functools.partial(self._profiled, request, job_dir, local))
        return run

    def _profiled(self, request: RunRequest, job_dir: str, local: Path) -> ProfiledSession:
        """The unit's profiled session, its dump pulled (asked for only where the runtime profiles,
        so only where the script wrote one)."""
        dump = local / edge_runner.ETDUMP_NAME
        self.conn.pull(f"{job_dir}/{edge_runner.ETDUMP_NAME}", dump)
        return _ProfiledOnUnit(dump, f"edge_runner ({request.target})")


def _controls(request: RunRequest, result: dict[str, Any]) -> dict[str, str]:
    """What the unit's session ran under: its thread count as the script reported it (a session
    runtime's pool takes a count, nothing about spinning); the script pins nothing."""
    threads = result.get("threads")
    told = f"{threads}" if request.intra_op_threads else f"{threads} (one per CPU the runner may run on)"
    return {
        "threads": told if isinstance(threads, int) else "runtime default",
        "affinity": "not controllable",
        "spinning": "not controllable",
    }


class _ProfiledOnUnit:
    """The profiled session the unit already ran (`profiled_run_count` runs, profiling on), as a
    runtime's profiler takes a session: its runs are done, so `infer` runs nothing, and the dump is
    the unit's. One reading of a dump, the host's, serves both places."""

    def __init__(self, dump: Path, runner: str) -> None:  # nothing loads on the host
        self._dump = dump
        self.runner = runner

    def infer(self) -> list[np.ndarray]:
        return []

    def write_etdump(self, path: Path) -> None:
        shutil.copyfile(self._dump, path)
