"""What a generation job puts on a unit: the model folder, the generation runner and its two libraries.

The build a unit gets is chosen as the ORT runner's is (`native_runner.native_target`: the profile's
`runner.native_target`, else the unit's ABI) and lives in `<runner root>/<target>/generate/`:
`farm_generate_runner` and `libonnxruntime-genai.so` (native_generate_build.py for Linux, the NDK
recipe in docs/android.md for a phone), with the `libonnxruntime.so*` onnxruntime-genai loads
beside them, or else the ORT runner's of the same target (`<target>/runner/`: the Linux builds
share it, and the qemu test runs the aarch64 generation runner against that library).

Everything goes through the push cache: the folder as one entry under its tree's hash (every file,
external data included), each binary under its own hash, so a second job pushes nothing again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ondevice_farm.errors import DeviceError, UsageError
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm_agents.android.device_paths import q
from ondevice_farm_agents.android.native_generate_build import BINARY_NAME, GENAI_LIBRARY
from ondevice_farm_agents.android.native_runner import native_target
from ondevice_farm_agents.android.push_cache import Cached, PushCache, describe, describe_folder
from ondevice_farm_agents.base import DeviceUnit, RunRequest

GENERATE_DIR = "generate"
ORT_RUNNER_DIR = "runner"


@dataclass(frozen=True)
class GenerationBuild:
    """The generation runner for one unit, on this host."""

    target: str
    binary: Path
    genai_library: Path
    ort_library: Path


@dataclass(frozen=True)
class StagedGeneration:
    """Device paths of what `stage_generation` pushed for one job."""

    folder: str
    binary: str
    genai_library: str
    ort_library: str


def find_generation_build(root: Path, unit: DeviceUnit, profile: DeviceProfile) -> GenerationBuild:
    target = native_target(unit, profile)
    directory = root / target / GENERATE_DIR
    binary, genai = directory / BINARY_NAME, directory / GENAI_LIBRARY
    if not binary.is_file() or not genai.is_file():
        how = (
            "build it with the NDK recipe in docs/android.md"
            if target.startswith("android-")
            else f"python -m ondevice_farm_agents.android.native_generate_build {target}"
        )
        raise UsageError(
            f"{unit.name}: the generation runner for {target} is not built in {directory}", hint=how
        )
    # `libonnxruntime.so*` matches the ONNX Runtime library only, never libonnxruntime-genai.so
    libraries = sorted(directory.glob("libonnxruntime.so*")) or sorted(
        (root / target / ORT_RUNNER_DIR).glob("libonnxruntime.so*")
    )
    if not libraries:
        raise UsageError(
            f"{unit.name}: no libonnxruntime.so for {target} beside the generation runner nor in "
            f"{root / target / ORT_RUNNER_DIR}",
            hint=f"python -m ondevice_farm_agents.android.native_build build {target}"
            if target.startswith("linux-")
            else "copy the AAR's jni/arm64-v8a/libonnxruntime.so beside it (docs/android.md)",
        )
    return GenerationBuild(target, binary, genai, libraries[0])


def stage_generation(cache: PushCache, build: GenerationBuild, request: RunRequest) -> StagedGeneration:
    """Push the folder and the runner with its libraries (each once per unit); the runner made
    executable."""
    folder = describe_folder(request.artifact)
    if folder.sha256 != request.artifact_sha256:
        raise DeviceError(
            f"{request.artifact} changed since it was stored (its tree hashes to {folder.sha256[:12]}, "
            f"the job's artifact is {request.artifact_sha256[:12]})",
            hint="resubmit: the folder is hashed again when stored",
        )
    items: list[Cached] = [
        folder,
        describe(build.binary),
        describe(build.genai_library),
        describe(build.ort_library),
    ]
    paths = cache.ensure(items)
    # adb push keeps no mode bits worth trusting; the cache entry is complete, so chmod is safe.
    made = cache.conn.shell(f"chmod 755 {q(paths[1])}")
    if not made.ok:
        raise DeviceError(
            f"{cache.conn.serial}: cannot make the generation runner executable: {made.output.strip()}"
        )
    return StagedGeneration(folder=paths[0], binary=paths[1], genai_library=paths[2], ort_library=paths[3])
