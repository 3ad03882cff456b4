"""The farm's native runner on a unit: which build a unit gets, its command line, what it wrote.

The binary (`agents/ondevice_farm_agents/android/native`, built by `ondevice_farm_agents.android.native_build`
or the NDK recipe in docs/android.md) sits in the push cache next to the model, with `libonnxruntime.so` in an
entry of its own; the command names that entry in `LD_LIBRARY_PATH`. Its contract, per job directory:
`result.json` (timings, samples, output list, versions, peak memory and what that figure is),
`outputs/<i>.npy` (first inference), `profile.json` (every profiled run; the host drops the cold
first one), or `error.json` (`stage`, `error`) and a non-zero exit.

Noise controls: `--cpus` pins the runner process (`sched_setaffinity`, before ONNX Runtime starts
a thread) and `--allow-spinning 0|1` sets `session.intra_op.allow_spinning`; `result.json`'s
`controls` says what was applied, read back from the kernel (`controls_from_result`).
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.analysis.energy import energy_estimate
from ondevice_farm.analysis.profile_runs import profiled_run_count, record_profile
from ondevice_farm.errors import DeviceError, UsageError
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm_agents.android.battery import EnergySettings
from ondevice_farm_agents.android.device_paths import q
from ondevice_farm_agents.android.jobs import run_detached
from ondevice_farm_agents.android.native_sustained import sustained_trace
from ondevice_farm_agents.android.transport import AdbConnection
from ondevice_farm_agents.base import WARM_LOAD_SAME_PROCESS, DeviceRun, DeviceUnit, RunRequest

RUNNER_BINARY = "farm_native_runner"
#: unit ABI (`ro.product.cpu.abi`) -> build directory under the runner root. An x86-64 unit is
#: taken for a Linux one (the ADB peer, boards); an x86-64 Android emulator needs the NDK build
#: put there instead (docs/android.md).
ABI_TARGETS = {"arm64-v8a": "android-arm64-v8a", "x86_64": "linux-x86_64"}
_OUTPUT_FILE = re.compile(r"^outputs/[0-9]+\.npy$")
_BACKENDS = ("cpu", "xnnpack", "nnapi", "qnn")
NNAPI_NO_CPU = "NNAPI_FLAG_CPU_DISABLED"

#: where the kernel lists devfreq devices; the runner reads the GPU's clock there per window
DEVFREQ_DIR = "/sys/class/devfreq"


@dataclass(frozen=True)
class NativeBuild:
    """The runner and its ONNX Runtime library for one unit, on this host."""

    target: str
    binary: Path
    library: Path


def native_target(unit: DeviceUnit, profile: DeviceProfile) -> str:
    """The build target for `unit`: the profile's `runner.native_target`, else the one for its ABI."""
    abi = unit.properties.get("ro.product.cpu.abi", "")
    target = profile.runner.get("native_target") or ABI_TARGETS.get(abi, "")
    if not target:
        raise UsageError(
            f"{unit.name}: no native runner build for ABI {abi or 'unknown'}",
            hint=f"set runner.native_target in {profile.name}.yaml (e.g. linux-aarch64)",
        )
    return target


def find_build(root: Path, unit: DeviceUnit, profile: DeviceProfile) -> NativeBuild:
    """The build for `unit` (`native_target`)."""
    target = native_target(unit, profile)
    directory = root / target / "runner"
    binary = directory / RUNNER_BINARY
    libraries = sorted(directory.glob("libonnxruntime.so*"))
    if not binary.is_file() or not libraries:
        how = (
            "build it with the NDK recipe in docs/android.md"
            if target.startswith("android-")
            else f"python -m ondevice_farm_agents.android.native_build build {target}"
        )
        raise UsageError(f"{unit.name}: the native runner for {target} is not built in {directory}", hint=how)
    return NativeBuild(target, binary, libraries[0])


def ep_options(pairs: list[str]) -> list[str]:
    """A profile's `key|value` provider options as the runner's `KEY=VALUE` arguments."""
    return [pair.replace("|", "=", 1) for pair in pairs]


@dataclass(frozen=True)
class NativeCommand:
    binary: str
    library_dir: str
    #: QNN's directory on the unit (libQnnHtp.so, stub, skel), put on LD_LIBRARY_PATH and ADSP_LIBRARY_PATH
    qnn_lib_dir: str = ""
    #: a plugin EP library on the unit (Qualcomm's libonnxruntime_providers_qnn.so)
    ep_library: str = ""

    def line(self, args: list[str]) -> str:
        libraries = ":".join(p for p in (self.library_dir, self.qnn_lib_dir) if p)
        env = [f"LD_LIBRARY_PATH={q(libraries)}"]
        if self.qnn_lib_dir:
            env.append(f"ADSP_LIBRARY_PATH={q(self.qnn_lib_dir)}")
        return " ".join([*env, q(self.binary), *(q(a) for a in args)])


class NativeRunner:
    def __init__(self, conn: AdbConnection, command: NativeCommand, options: list[str]) -> None:
        self.conn = conn
        self.command = command
        self.options = options

    def _args(
        self, model: str, inputs: tuple[tuple[str, str], ...], out: str, request: RunRequest, **over: int
    ) -> list[str]:
        backend = request.target.backend
        if request.target.runtime != "ort" or backend not in _BACKENDS:
            raise UsageError(f"the native runner cannot run {request.target}")
        args = ["--model", model, "--out", out, "--ep", backend]
        for name, path in inputs:
            args += ["--input", f"{name}={path}"]
        for option in self.options:
            args += ["--ep-option", option]
        if self.command.ep_library and backend == "qnn":
            args += ["--ep-library", self.command.ep_library]
        args += ["--warmup", str(over.get("warmup", request.warmup))]
        args += ["--runs", str(over.get("runs", request.runs))]
        args += ["--profile-runs", str(over.get("profile_runs", 0))]
        if request.intra_op_threads:
            args += ["--threads", str(request.intra_op_threads)]
        if request.cpu_affinity:
            args += ["--cpus", ",".join(str(c) for c in cpu_list(request.cpu_affinity))]
        if request.allow_spinning is not None:
            args += ["--allow-spinning", "1" if request.allow_spinning else "0"]
        if request.sustained_s > 0 and over.get("sustained", 1):
            args += [
                "--sustained-s",
                f"{request.sustained_s:g}",
                "--window-s",
                f"{request.sustained_window_s:g}",
                # named on the command line (not the runner's default) so an ADB peer maps it
                "--devfreq-dir",
                DEVFREQ_DIR,
            ]
        return args

    def _failure(self, out: str, output: str) -> str:
        """The runner's own error.json where it wrote one, else the tail of what it printed."""
        found = self.conn.shell(f"cat {q(out)}/error.json 2>/dev/null; true").output.strip()
        try:
            error = json.loads(found) if found else {}
        except json.JSONDecodeError:
            error = {}
        if isinstance(error, dict) and error.get("error"):
            return f"at {error.get('stage', '?')}: {error['error']}"
        return output.strip()[-500:] or "no output"

    def run(
        self,
        model: str,
        inputs: tuple[tuple[str, str], ...],
        request: RunRequest,
        job_dir: str,
        energy: EnergySettings | None = None,
    ) -> DeviceRun:
        """`energy`: sample the battery over an idle window and the timed runs (None: do not)."""
        profile_runs = profiled_run_count(request.runs) if request.profile_ops else 0
        args = self._args(model, inputs, job_dir, request, profile_runs=profile_runs)
        if energy is not None:
            args += energy.runner_args()
        result = run_detached(self.conn, job_dir, self.command.line(args), request.timeout_s)
        if result.exit_code != 0:
            reason = self._failure(job_dir, result.output)
            raise DeviceError(f"{self.conn.serial}: the native runner failed {reason}")
        with tempfile.TemporaryDirectory(prefix="farm-android-") as tmp:
            run = self._collect(job_dir, Path(tmp), request)
        if request.target.is_accelerator:
            run.notes.append(self._probe(model, inputs, request, job_dir))
        return run

    def _collect(self, job_dir: str, local: Path, request: RunRequest) -> DeviceRun:
        self.conn.pull(f"{job_dir}/result.json", local / "result.json")
        data = json.loads((local / "result.json").read_text())
        if not isinstance(data, dict):
            raise DeviceError("the native runner's result.json is not a JSON object")
        samples = data.get("samples_ms")
        if not isinstance(samples, list) or not all(_finite(s) for s in samples) or not samples:
            raise DeviceError("the native runner's result has no valid 'samples_ms'")
        outputs = self._outputs(job_dir, local, data.get("outputs"))
        peak = data.get("peak_memory_bytes")
        warm_load_ms = float(data["warm_load_ms"]) if _finite(data.get("warm_load_ms")) else None
        run = DeviceRun(
            load_ms=_number(data, "load_ms"),
            first_inference_ms=_number(data, "first_inference_ms"),
            samples_ms=[float(s) for s in samples],
            outputs=outputs,
            peak_memory_bytes=peak if isinstance(peak, int) and not isinstance(peak, bool) else None,
            runner=runner_label(data),
            warm_load_ms=warm_load_ms,
            warm_load_method=WARM_LOAD_SAME_PROCESS if warm_load_ms is not None else "",
            sustained=sustained_trace(data["sustained"]) if isinstance(data.get("sustained"), dict) else None,
        )
        if isinstance(data.get("energy"), dict):
            try:
                run.energy = energy_estimate(data["energy"])
            except (KeyError, TypeError, ValueError) as exc:
                raise DeviceError(f"the native runner's energy section is malformed: {exc}") from exc
        if isinstance(data.get("controls"), dict):
            run.controls = controls_from_result(data["controls"], request)
            if data["controls"].get("threads_source") == "one per pinned CPU":
                run.notes.append(
                    f"intra-op threads: {run.controls['threads']}, one per pinned CPU (ONNX Runtime's "
                    "default count pins each worker to a core of its own, outside the mask)"
                )
        if data.get("peak_memory_kind"):
            run.notes.append(f"peak memory: {data['peak_memory_kind']}")
        for skipped in data.get("outputs_skipped") or []:
            if isinstance(skipped, dict):
                run.notes.append(f"output {skipped.get('name')!r} not returned: {skipped.get('reason')}")
        if request.profile_ops:
            self.conn.pull(f"{job_dir}/profile.json", local / "profile.json")
            events = json.loads((local / "profile.json").read_text())
            if not isinstance(events, list):
                raise DeviceError("the profile from the device is not a list of trace events")
            record_profile(run, events)
        return run

    def _outputs(self, job_dir: str, local: Path, listed: Any) -> dict[str, np.ndarray]:
        if not isinstance(listed, list):
            raise DeviceError("the native runner's result has no 'outputs' list")
        outputs: dict[str, np.ndarray] = {}
        for index, entry in enumerate(listed):
            if not isinstance(entry, dict) or not _OUTPUT_FILE.match(str(entry.get("file", ""))):
                raise DeviceError(f"the native runner's output entry {index} is malformed")
            target = local / f"output_{index}.npy"
            self.conn.pull(f"{job_dir}/{entry['file']}", target)
            # allow_pickle=False: nothing from the device is ever executed on the host.
            outputs[str(entry["name"])] = np.load(target, allow_pickle=False)
        return outputs

    def _probe(
        self, model: str, inputs: tuple[tuple[str, str], ...], request: RunRequest, job_dir: str
    ) -> str:
        """One run with CPU fallback disabled (and NNAPI's own CPU device too): does every node run
        on the accelerator?"""
        probe_dir = f"{job_dir}/probe"
        probe = NativeRunner(self.conn, self.command, self.options)
        if request.target.backend == "nnapi" and not any(o.startswith(NNAPI_NO_CPU) for o in self.options):
            probe.options = [*self.options, f"{NNAPI_NO_CPU}=1"]
        args = probe._args(model, inputs, probe_dir, request, warmup=0, runs=1, profile_runs=0, sustained=0)
        args.append("--disable-cpu-fallback")
        result = run_detached(self.conn, probe_dir, self.command.line(args), request.timeout_s)
        if result.exit_code == 0:
            return "every node runs on the accelerator (CPU fallback disabled: the probe passed)"
        reason = self._failure(probe_dir, result.output)[:300]
        return f"some nodes need the CPU: with CPU fallback disabled the runner failed {reason}"


def cpu_list(cpus: tuple[int, ...]) -> list[int]:
    """`RunRequest.cpu_affinity` checked: CPU numbers, none negative, sorted and unique."""
    if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in cpus):
        raise UsageError(f"CPU affinity takes CPU numbers (0, 1, ...), not {list(cpus)}")
    return sorted(set(cpus))


def spinning_text(allow: bool | None) -> str:
    return "runtime default" if allow is None else ("on" if allow else "off")


def controls_from_result(reported: dict[str, Any], request: RunRequest) -> dict[str, str]:
    """`DeviceRun.controls` from result.json's `controls`: what the runner read back, not what was
    asked. An affinity the runtime's own threads escaped is said beside the main thread's mask."""

    def cpus(key: str) -> list[int]:
        value = reported.get(key)
        if not isinstance(value, list) or not all(
            isinstance(c, int) and not isinstance(c, bool) for c in value
        ):
            raise DeviceError(f"the native runner's controls have no valid {key!r}")
        return value

    threads = reported.get("threads")
    affinity, workers = cpus("affinity"), cpus("threads_affinity")
    if reported.get("cpus_requested") is None:
        pinned = "not pinned"
    else:
        pinned = ",".join(map(str, affinity))
        if workers != affinity:
            pinned += f" (the runtime's threads ran on {','.join(map(str, workers))})"
    spinning = reported.get("allow_spinning")
    if spinning is not None and not isinstance(spinning, bool):
        raise DeviceError("the native runner's controls have no valid 'allow_spinning'")
    if spinning != request.allow_spinning:
        raise DeviceError(
            f"the native runner applied spinning {spinning_text(spinning)}, "
            f"{spinning_text(request.allow_spinning)} was asked (an older build?)"
        )
    return {
        "threads": str(threads) if isinstance(threads, int) and threads > 0 else "runtime default",
        "affinity": pinned,
        "spinning": spinning_text(spinning),
    }


def runner_label(data: dict[str, Any]) -> str:
    """e.g. `farm_native_runner 0.1.0 (Release), onnxruntime 1.32.0 (Release, API 29)`."""
    return (
        f"{data.get('runner', 'farm_native_runner')} {data.get('runner_version', '?')} "
        f"({data.get('runner_build_type', '?')}), onnxruntime {data.get('ort_version', '?')} "
        f"({data.get('ort_build_type') or '?'}, API {data.get('ort_api_version', '?')})"
    )


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)


def _number(data: dict[str, Any], key: str) -> float:
    value = data.get(key)
    if not _finite(value):
        raise DeviceError(f"the native runner's result has no valid {key!r}")
    return float(value)  # type: ignore[arg-type]
