"""Build the native generation runner (agents/ondevice_farm_agents/android/native_generate) for Linux x86-64
and aarch64.

    python -m ondevice_farm_agents.android.native_generate_build [linux-x86_64|linux-aarch64]

What it links and where it comes from:
- linux-x86_64: the `libonnxruntime-genai.so` of the installed onnxruntime-genai wheel;
- linux-aarch64: the same library from the aarch64 wheel of the same version (`pip download`, once,
  into `~/.cache/farm/native/genai-aarch64/`), Debian's `g++-aarch64-linux-gnu`.
onnxruntime-genai loads libonnxruntime itself at run time (`ORT_LIB_PATH`): on x86-64 the installed
onnxruntime wheel's, on aarch64 the ORT runner's (`native_build.fetch_aarch64_library`, ORT 1.28;
1.32's aarch64 library works too). Under qemu-user before 8.2 the runner needs an ARM /proc/cpuinfo
(tests/android/qemu/cpuinfo_shim.c), as the ORT runner does: onnxruntime-genai's cpuinfo
dereferences NULL at load time on the host's x86 one.

Builds go to `<repo>/build/native/<target>/generate/`, the library copied beside the binary: where
the Android agent takes a unit's build from (generate_stage.py).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ondevice_farm_agents.android.build_lock import exclusive
from ondevice_farm_agents.android.native_build import (
    AARCH64_COMPILER,
    DEFAULT_BUILD_ROOT,
    DEFAULT_CACHE_DIR,
    TARGETS,
    NativeBuildError,
)

SOURCE_DIR = Path(__file__).resolve().parent / "native_generate"
BINARY_NAME = "farm_generate_runner"
GENAI_LIBRARY = "libonnxruntime-genai.so"
GENAI_DISTRIBUTION = "onnxruntime-genai"
AARCH64_GENAI_PLATFORM = "manylinux_2_28_aarch64"


PACKAGES_HINT = "Debian packages: cmake g++ make; for aarch64 also g++-aarch64-linux-gnu qemu-user"
#: building, or downloading the aarch64 wheel, on a slow host
BUILD_TIMEOUT_S = 600.0


def _run(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise NativeBuildError(f"{what}: {argv[0]} is not installed", hint=PACKAGES_HINT) from None
    except subprocess.TimeoutExpired:
        raise NativeBuildError(f"{what}: {argv[0]} ran past {BUILD_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise NativeBuildError(f"{what} failed: {' | '.join(tail)}")


def _installed_genai_version() -> str:
    try:
        return importlib.metadata.version(GENAI_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise NativeBuildError(
            "the generation runner links onnxruntime-genai's library: onnxruntime-genai is not installed",
            hint="pip install onnxruntime-genai==0.18.0",
        ) from None


def host_genai_library() -> Path:
    """The library the installed onnxruntime-genai wheel ships (the one the host agent runs)."""
    _installed_genai_version()
    spec = importlib.util.find_spec("onnxruntime_genai")
    assert spec is not None and spec.submodule_search_locations
    return Path(spec.submodule_search_locations[0]) / GENAI_LIBRARY


def fetch_aarch64_genai_library(cache_dir: Path = DEFAULT_CACHE_DIR) -> Path:
    """The aarch64 wheel's library, of the installed version, downloaded with pip once."""
    version = _installed_genai_version()
    target = cache_dir / "genai-aarch64" / version / GENAI_LIBRARY
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    python = f"{sys.version_info.major}{sys.version_info.minor}"
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        _run(
            [sys.executable, "-m", "pip", "download", f"{GENAI_DISTRIBUTION}=={version}", "--platform",
             AARCH64_GENAI_PLATFORM, "--python-version", python, "--only-binary=:all:", "--no-deps", "-q",
             "-d", tmp],
            f"downloading the aarch64 {GENAI_DISTRIBUTION} {version} wheel",
        )  # fmt: skip
        (wheel,) = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as zipped:
            (name,) = [n for n in zipped.namelist() if n.endswith("/" + GENAI_LIBRARY)]
            staged = Path(tmp) / GENAI_LIBRARY
            staged.write_bytes(zipped.read(name))
        staged.rename(target)  # whole or not at all
    return target


def build(target: str = "linux-x86_64", build_root: Path = DEFAULT_BUILD_ROOT) -> Path:
    """The runner's binary for `target`, built with CMake (the library beside it)."""
    if target not in TARGETS:
        raise NativeBuildError(f"unknown target {target!r}; one of {', '.join(TARGETS)}")
    library = fetch_aarch64_genai_library() if target == "linux-aarch64" else host_genai_library()
    out = build_root / target / "generate"
    configure = ["cmake", "-S", str(SOURCE_DIR), "-B", str(out), f"-DGENAI_LIBRARY={library}"]
    if target == "linux-aarch64":
        configure += [f"-DCMAKE_CXX_COMPILER={AARCH64_COMPILER}", "-DCMAKE_SYSTEM_NAME=Linux",
                      "-DCMAKE_SYSTEM_PROCESSOR=aarch64"]  # fmt: skip
    with exclusive(out):
        _run(configure, f"configuring the generation runner for {target}")
        _run(["cmake", "--build", str(out), "-j", "2"], f"building the generation runner for {target}")
        shutil.copy2(library, out / GENAI_LIBRARY)
    return out / BINARY_NAME


if __name__ == "__main__":
    # `fetch`: the aarch64 library only (scripts/test, before its tests lose the network); else a build
    if sys.argv[1:] == ["fetch"]:
        print(fetch_aarch64_genai_library())
    else:
        print(build(sys.argv[1] if len(sys.argv) > 1 else "linux-x86_64"))
