"""ExecuTorch (`.pte`) and LiteRT (`.tflite`) jobs on an Android unit: what `prepare` pushes, and
`edge_runner.py`'s run under the unit's python3 turned into a `DeviceRun`.

Only a profile whose runner starts the unit's python3 (kind `farm-runner`: Linux boards, units
whose python3 has `executorch` or `ai-edge-litert`) runs them. The farm's native runner links ONNX
Runtime alone and onnxruntime_perf_test reads ONNX alone; no Android build of ExecuTorch or LiteRT
can be made on the farm's build machine (no NDK), so a profile of those kinds refuses the job with
the build recipe (docs/android.md) rather than run something else.

The measurement is the host's (`host/edge_run.py`), by the same code where it can be: the session
module (`host/edge_runtimes.py`) is pushed beside the script and makes the session on the unit, the
imports done before the clock are `host/edge_session.py`'s list, the profiled run count is
`profiled_run_count`, and ExecuTorch's ETDump from the unit is read by `host/edge_profile.py` with
the ETRecord the compile left beside the artifact on the host.
"""

from __future__ import annotations

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
from ondevice_farm_agents.host import edge_runtimes
from ondevice_farm_agents.host.edge_run import (
    LITERT_PROFILE_NOTE,
    SAMPLE_NOTE,
    feature_names,
    input_order,
    output_names,
)
from ondevice_farm_agents.host.edge_runtimes import ExecuTorchSession
from ondevice_farm_agents.host.edge_session import IMPORTED_FIRST

EDGE_RUNTIMES = ("executorch", "litert")
RUNNER_SCRIPT = Path(edge_runner.__file__)
SESSION_MODULE = Path(edge_runtimes.__file__)
BUILD_RECIPE = (
    "docs/android.md, 'ExecuTorch and LiteRT on Android': a native runner is built with the NDK "
    "(ExecuTorch's executor_runner, LiteRT's benchmark_model); until then a unit whose python3 has "
    "the runtime runs these jobs with runner.kind: farm-runner"
)
PIP_NAMES = {"executorch": "executorch", "litert": "ai-edge-litert"}


class NoEdgeRunnerError(UsageError):
    """The unit's profile names a runner that cannot run ExecuTorch or LiteRT programs."""

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
                describe(SESSION_MODULE),
            ]
        )
    return StagedJob(model=paths[0], inputs=paths[1], runner_script=paths[2], session_module=paths[3])


class EdgeRunner:
    def __init__(self, conn: AdbConnection, python: str) -> None:
        self.conn = conn
        self.python = python

    def _argv(self, staged: StagedJob, request: RunRequest, job_dir: str) -> list[str]:
        target = request.target
        args = [self.python, staged.runner_script, "--session-module", staged.session_module]
        args += ["--runtime", target.runtime, "--backend", target.backend]
        args += ["--model", staged.model, "--inputs", staged.inputs, "--out", job_dir]
        args += ["--warmup", str(request.warmup), "--runs", str(request.runs)]
        for name in input_order(request):
            args += ["--input", name]
        names = feature_names(request)
        for flag, values in zip(("--feature-input", "--feature-output"), names or ([], []), strict=True):
            for value in values:
                args += [flag, value]
        for module in IMPORTED_FIRST[target.runtime]:
            args += ["--import", module]
        if request.intra_op_threads:
            args += ["--threads", str(request.intra_op_threads)]
        if request.profile_ops and target.runtime == "executorch":
            args += ["--profile-runs", str(profiled_run_count(request.runs))]
        return args

    def run(self, staged: StagedJob, request: RunRequest, job_dir: str) -> DeviceRun:
        target = request.target
        command = " ".join(q(a) for a in self._argv(staged, request, job_dir))
        result = run_detached(self.conn, job_dir, command, request.timeout_s)
        tail = result.output.strip()[-500:]
        if result.exit_code == edge_runner.MISSING_RUNTIME_EXIT:
            missing = tail.splitlines()[-1] if tail else f"edge_runner: {self.python} lacks {target.runtime}"
            install = f"pip install {PIP_NAMES[target.runtime]} for the unit's {self.python}"
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
            if request.profile_ops and target.runtime == "executorch":
                dump = local / edge_runner.ETDUMP_NAME
                self.conn.pull(f"{job_dir}/{edge_runner.ETDUMP_NAME}", dump)
                _read_etdump(request, run, dump)
            elif request.profile_ops:
                run.notes.append(LITERT_PROFILE_NOTE)
        return run


def _controls(request: RunRequest, result: dict[str, Any]) -> dict[str, str]:
    """What the unit's session ran under: its thread count as the script reported it (both
    runtimes' pools take a count, nothing about spinning); the script pins nothing."""
    threads = result.get("threads")
    told = f"{threads}" if request.intra_op_threads else f"{threads} (one per CPU the runner may run on)"
    return {
        "threads": told if isinstance(threads, int) else "runtime default",
        "affinity": "not controllable",
        "spinning": "not controllable",
    }


def _read_etdump(request: RunRequest, run: DeviceRun, dump: Path) -> None:
    from ondevice_farm_agents.host.edge_profile import profile_executorch

    profile_executorch(request, run, lambda: _ProfiledOnUnit(dump, f"edge_runner ({request.target})"))


class _ProfiledOnUnit(ExecuTorchSession):
    """The profiled session the unit already ran (`profiled_run_count` runs, ETDump on), as
    `profile_executorch` takes a session: its runs are done, so `infer` runs nothing, and the dump
    is the unit's. One reading of an ETDump, the host's, serves both places."""

    def __init__(self, dump: Path, runner: str) -> None:  # nothing loads on the host
        self._dump = dump
        self.runner = runner

    def infer(self) -> list[np.ndarray]:
        return []

    def write_etdump(self, path: Path) -> None:
        shutil.copyfile(self._dump, path)
