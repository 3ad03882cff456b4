"""A generation job on a unit: the farm's native generation runner over ADB, measured.

`AndroidGeneration.prepare` pushes the folder and the runner (generate_stage.py); `run` waits for a
cool unit as every job does, writes the plan's token ids into a fresh job directory (a long prompt
or depth filler would not fit the command line adbd takes), starts the runner detached
(jobs.run_detached: its deadline is the job's `timeout_s`, a cancel stops it by pid), pulls its
`result.json` and reads it with generate_result.py, the reader the Linux and qemu runs use too.

The runner is a fresh process per session, as on the host: a repeat (`measure_session`) is another
`run`, its own cold load and warm-up, whose per-token decode latencies join the job's.

Noise controls: the runner sets onnxruntime-genai's intra-op thread count (`--threads`, through
genai_config.json's session options); it neither pins CPUs nor sets spinning, so a job that asks
for either is refused rather than measured without it.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ondevice_farm.errors import DeviceError, DeviceLostError, DeviceTimeoutError, UsageError
from ondevice_farm.generate.trace import GenerationPlan
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm_agents.android.device_paths import DevicePaths, q
from ondevice_farm_agents.android.generate_result import generation_run
from ondevice_farm_agents.android.generate_stage import (
    StagedGeneration,
    find_generation_build,
    stage_generation,
)
from ondevice_farm_agents.android.jobs import run_detached
from ondevice_farm_agents.android.push_cache import PushCache
from ondevice_farm_agents.android.thermal import wait_until_cool
from ondevice_farm_agents.android.transport import AdbConnection
from ondevice_farm_agents.base import DeviceRun, DeviceUnit, EnergyEstimate, RunRequest, Thermal

GENERATION_TARGET = "ort/cpu"
PROMPT_FILE = "prompt_ids.txt"
DEPTH_FILE = "depth_ids.txt"
#: genai_config.json's defaults for the decoder's cache outputs (onnxruntime-genai's model builder)
DEFAULT_PRESENT_NAMES = ("present.%d.key", "present.%d.value")


def cache_outputs(folder: Path) -> list[str]:
    """Every layer's K and V output as genai_config.json names them: what the runner sizes."""
    try:
        decoder = json.loads((folder / "genai_config.json").read_text())["model"]["decoder"]
        layers = int(decoder["num_hidden_layers"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DeviceError(f"{folder}: genai_config.json names no decoder layers ({exc})") from None
    outputs = decoder.get("outputs") or {}
    patterns = (
        str(outputs.get("present_key_names", DEFAULT_PRESENT_NAMES[0])),
        str(outputs.get("present_value_names", DEFAULT_PRESENT_NAMES[1])),
    )
    return [pattern % layer for layer in range(layers) for pattern in patterns]


def runner_arguments(plan: GenerationPlan, folder: str, out: str, request: RunRequest) -> list[str]:
    """The runner's command line for `plan`; the token ids are in PROMPT_FILE and DEPTH_FILE (cwd)."""
    args = ["--model", folder, "--out", out, "--prompt-ids", f"@{PROMPT_FILE}"]
    args += ["--decode", str(plan.decode_tokens), "--depths", ",".join(map(str, plan.depths))]
    if max(plan.depths) > 0:
        args += ["--depth-ids", f"@{DEPTH_FILE}"]
    args += ["--reps", str(plan.reps), "--warmup", str(plan.warmup)]
    if request.intra_op_threads:
        args += ["--threads", str(request.intra_op_threads)]
    for name in cache_outputs(request.artifact):
        args += ["--kv-output", name]
    return args


def command_line(staged: StagedGeneration, args: list[str]) -> str:
    """onnxruntime-genai is found through LD_LIBRARY_PATH (each cache entry is a directory of its
    own, so $ORIGIN does not reach it); ONNX Runtime through ORT_LIB_PATH, which onnxruntime-genai
    loads at run time, and LD_LIBRARY_PATH too for a build that links it instead."""
    libraries = ":".join(p.rsplit("/", 1)[0] for p in (staged.genai_library, staged.ort_library))
    env = [f"LD_LIBRARY_PATH={q(libraries)}", f"ORT_LIB_PATH={q(staged.ort_library)}"]
    return " ".join([*env, q(staged.binary), *(q(a) for a in args)])


def _controls(request: RunRequest) -> dict[str, str]:
    threads = str(request.intra_op_threads) if request.intra_op_threads else "runtime default"
    return {"threads": threads, "affinity": "not pinned", "spinning": "runtime default"}


class AndroidGeneration:
    """Generation jobs for one `AndroidAgent`: what it staged per (unit, folder), and the runs."""

    def __init__(self, paths: DevicePaths, native_root: Path, cache_limit_bytes: int) -> None:
        self._paths = paths
        self._native_root = native_root
        self._cache_limit = cache_limit_bytes
        self._staged: dict[tuple[str, str], StagedGeneration] = {}

    def prepare(
        self, conn: AdbConnection, unit: DeviceUnit, profile: DeviceProfile, request: RunRequest
    ) -> None:
        kind = profile.runner.get("kind", "native")
        if (
            request.target.name != GENERATION_TARGET
            or not profile.supports(request.target)
            or kind != "native"
        ):
            raise UsageError(
                f"{unit.name} runs generation jobs with the native runner on {GENERATION_TARGET} only, "
                f"not {request.target} with the {kind} runner"
            )
        if request.cpu_affinity or request.allow_spinning is not None:
            raise UsageError(
                f"{unit.name}: the generation runner sets intra-op threads only; it does not pin CPUs "
                "or set spinning",
                hint="drop the CPU affinity and spinning settings for a generation job",
            )
        if not (request.artifact / "genai_config.json").is_file():
            raise DeviceError(
                f"{request.artifact} is not an ONNX Runtime GenAI folder (no genai_config.json)"
            )
        build = find_generation_build(self._native_root, unit, profile)
        cache = PushCache(conn, self._paths, self._cache_limit)
        self._staged[(unit.serial, request.artifact_sha256)] = stage_generation(cache, build, request)

    def run(
        self,
        conn: AdbConnection,
        unit: DeviceUnit,
        profile: DeviceProfile,
        request: RunRequest,
        thermal: Callable[[], Thermal | None],
        check_cancelled: Callable[[], None],
    ) -> DeviceRun:
        """One session. `thermal` reads the unit; `check_cancelled` raises once the job is cancelled
        (the wait for a cool unit may take minutes)."""
        plan = request.generation
        if plan is None:
            raise UsageError("not a generation job")
        key = (unit.serial, request.artifact_sha256)
        if key not in self._staged:
            self.prepare(conn, unit, profile, request)
        staged = self._staged.pop(key)

        def thermal_unless_cancelled() -> Thermal:
            check_cancelled()
            return thermal() or Thermal(status="unknown")

        before = wait_until_cool(
            thermal_unless_cancelled,
            profile.thermal.max_start_temperature_c,
            profile.thermal.cooldown_deadline_s,
        )
        job_dir = self._paths.job(f"{request.artifact_sha256[:12]}-{uuid.uuid4().hex[:8]}")
        try:
            data = self._generate(conn, staged, plan, request, job_dir)
        finally:
            # When the link is gone the directory stays; every job starts in a fresh one anyway.
            with contextlib.suppress(DeviceLostError, DeviceTimeoutError):
                conn.shell(f"rm -rf {q(job_dir)}")
        run = generation_run(data, plan)
        run.controls = _controls(request)
        run.energy = EnergyEstimate(absent="the generation runner does not sample the battery")
        run.thermal_before = before if before.temperatures_c else None
        try:
            run.thermal_after = thermal()
        except DeviceError as exc:
            # The measurements are already here; a link lost now should not throw them away.
            run.notes.append(f"no thermal reading after the run: {exc}")
        return run

    def _generate(
        self,
        conn: AdbConnection,
        staged: StagedGeneration,
        plan: GenerationPlan,
        request: RunRequest,
        job_dir: str,
    ) -> Any:
        with tempfile.TemporaryDirectory(prefix="farm-generate-") as tmp:
            local = Path(tmp)
            made = conn.shell(f"mkdir -p {q(job_dir)}")
            if not made.ok:
                raise DeviceError(f"{conn.serial}: cannot create {job_dir}: {made.output.strip()}")
            (local / PROMPT_FILE).write_text(",".join(map(str, plan.prompt_ids)))
            conn.push(local / PROMPT_FILE, f"{job_dir}/{PROMPT_FILE}")
            if max(plan.depths) > 0:
                (local / DEPTH_FILE).write_text(",".join(map(str, plan.depth_ids[: max(plan.depths)])))
                conn.push(local / DEPTH_FILE, f"{job_dir}/{DEPTH_FILE}")
            args = runner_arguments(plan, staged.folder, job_dir, request)
            result = run_detached(conn, job_dir, command_line(staged, args), request.timeout_s)
            if result.exit_code != 0:
                reason = self._failure(conn, job_dir, result.output)
                raise DeviceError(f"{conn.serial}: the generation runner failed: {reason}")
            conn.pull(f"{job_dir}/result.json", local / "result.json")
            try:
                return json.loads((local / "result.json").read_text())
            except ValueError as exc:
                raise DeviceError(
                    f"{conn.serial}: the generation runner's result.json is not JSON ({exc})"
                ) from None

    @staticmethod
    def _failure(conn: AdbConnection, job_dir: str, output: str) -> str:
        """The runner's own error.json where it wrote one, else the tail of what it printed."""
        found = conn.shell(f"cat {q(job_dir)}/error.json 2>/dev/null; true").output.strip()
        try:
            error = json.loads(found) if found else {}
        except json.JSONDecodeError:
            error = {}
        if isinstance(error, dict) and error.get("error"):
            return str(error["error"])
        return output.strip()[-500:] or "no output"
