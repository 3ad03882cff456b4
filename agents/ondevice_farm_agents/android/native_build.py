"""Build the native runner (agents/ondevice_farm_agents/android/native) for Linux x86-64 and aarch64, cached.

    python -m ondevice_farm_agents.android.native_build fetch           # downloads only (network)
    python -m ondevice_farm_agents.android.native_build build [TARGET]  # linux-x86_64 (default) or -aarch64
        [--build-root DIR] [--cache-dir DIR]

What it needs and where it comes from:
- ONNX Runtime's C headers: `headers/` of the official Android AAR, which the npm package
  `com.github.asus4.onnxruntime` bundles (`npm pack`, ~150 MB once; headers of ORT 1.29, API 29).
  The AAR's `jni/arm64-v8a/libonnxruntime.so` is kept beside them for the Android recipe.
- linux-x86_64: the `libonnxruntime.so.1.x.y` the installed onnxruntime wheel ships in `capi/`.
- linux-aarch64: the aarch64 onnxruntime wheel (`pip download`, ORT 1.28, API 28), Debian's
  `g++-aarch64-linux-gnu`; the result runs under `qemu-aarch64 -L /usr/aarch64-linux-gnu`.

Downloads are kept in `cache_dir` (default `~/.cache/farm/native`), builds in `<repo>/build/native/
<target>/runner/` (an installed farm: `~/.cache/farm/native/build/<target>/runner/`; the binary and the
library under its SONAME), rebuilt only when the sources, the headers, the library or the compiler
change. The sources travel in the wheel as package data.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ondevice_farm.artifacts import sha256_file
from ondevice_farm.errors import FarmError
from ondevice_farm_agents.android.build_lock import exclusive

REPO = Path(__file__).resolve().parents[3]
SOURCE_DIR = Path(__file__).resolve().parent / "native"
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "farm" / "native"
#: a source checkout builds in its own `build/` (ignored by git); an installed farm must not write
#: into site-packages, so it builds beside its downloads
DEFAULT_BUILD_ROOT = (
    REPO / "build" / "native" if (REPO / "pyproject.toml").is_file() else DEFAULT_CACHE_DIR / "build"
)
RUNNER_NAME = "farm_native_runner"

NPM_PACKAGE = "com.github.asus4.onnxruntime@0.4.9"
NPM_TARBALL = "com.github.asus4.onnxruntime-0.4.9.tgz"
AAR_MEMBER = "package/Plugins/Android/onnxruntime.aar"
AARCH64_WHEEL = "onnxruntime==1.28.0"
AARCH64_PLATFORM = "manylinux_2_27_aarch64"
AARCH64_COMPILER = "aarch64-linux-gnu-g++"
AARCH64_SYSROOT = Path("/usr/aarch64-linux-gnu")
TARGETS = ("linux-x86_64", "linux-aarch64")
DEFAULT_BUILD_TIMEOUT_S = 600.0


class NativeBuildError(FarmError):
    """The runner cannot be downloaded or built here (a tool missing, no network, a compile error)."""


@dataclass(frozen=True)
class Sdk:
    headers: Path
    android_arm64_library: Path


@dataclass(frozen=True)
class RunnerBuild:
    target: str
    binary: Path
    library: Path

    @property
    def directory(self) -> Path:
        return self.binary.parent


def _run(
    argv: list[str], what: str, cwd: Path | None = None, timeout_s: float = DEFAULT_BUILD_TIMEOUT_S
) -> str:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise NativeBuildError(f"{what}: {argv[0]} is not installed", hint=_PACKAGES_HINT) from None
    except subprocess.TimeoutExpired:
        raise NativeBuildError(f"{what}: {argv[0]} ran past {timeout_s:.0f} s") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise NativeBuildError(f"{what} failed: {' | '.join(tail)}")
    return done.stdout


_PACKAGES_HINT = "Debian packages: cmake g++ make npm; for aarch64 also g++-aarch64-linux-gnu qemu-user"


def fetch_sdk(cache_dir: Path = DEFAULT_CACHE_DIR) -> Sdk:
    """The AAR's headers and arm64-v8a library, downloaded with npm once."""
    sdk = cache_dir / "aar"
    done = sdk / "complete"
    if not done.exists():
        downloads = cache_dir / "downloads"
        downloads.mkdir(parents=True, exist_ok=True)
        tarball = downloads / NPM_TARBALL
        if not tarball.exists():
            _run(["npm", "pack", NPM_PACKAGE, "--silent"], f"downloading {NPM_PACKAGE}", cwd=downloads)
        with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
            staging = Path(tmp) / "aar"
            with tarfile.open(tarball) as archive:
                member = archive.extractfile(AAR_MEMBER)
                if member is None:
                    raise NativeBuildError(f"{tarball} holds no {AAR_MEMBER}")
                aar = Path(tmp) / "onnxruntime.aar"
                aar.write_bytes(member.read())
            with zipfile.ZipFile(aar) as zipped:
                for name in zipped.namelist():
                    if name.startswith("headers/") and not name.endswith("/"):
                        _extract(zipped, name, staging / name)
                _extract(
                    zipped, "jni/arm64-v8a/libonnxruntime.so", staging / "jni/arm64-v8a/libonnxruntime.so"
                )
            shutil.rmtree(sdk, ignore_errors=True)
            staging.rename(sdk)
        done.touch()
        tarball.unlink()  # 150 MB that nothing reads again
    return Sdk(sdk / "headers", sdk / "jni/arm64-v8a/libonnxruntime.so")


def _extract(zipped: zipfile.ZipFile, name: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(zipped.read(name))


def fetch_aarch64_library(cache_dir: Path = DEFAULT_CACHE_DIR) -> Path:
    """libonnxruntime.so.1.x.y of the aarch64 Linux wheel, downloaded with pip once."""
    target = cache_dir / "linux-aarch64"
    found = sorted(target.glob("libonnxruntime.so.1.*"))
    if found:
        return found[0]
    with tempfile.TemporaryDirectory(dir=cache_dir if cache_dir.exists() else None) as tmp:
        _run(
            [sys.executable, "-m", "pip", "download", AARCH64_WHEEL, "--platform", AARCH64_PLATFORM,
             "--only-binary=:all:", "--no-deps", "-q", "-d", tmp],
            f"downloading the aarch64 {AARCH64_WHEEL} wheel",
        )  # fmt: skip
        (wheel,) = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as zipped:
            (name,) = [n for n in zipped.namelist() if "/capi/libonnxruntime.so.1." in n]
            _extract(zipped, name, target / Path(name).name)
    return sorted(target.glob("libonnxruntime.so.1.*"))[0]


def fetch_all(cache_dir: Path = DEFAULT_CACHE_DIR) -> None:
    fetch_sdk(cache_dir)
    fetch_aarch64_library(cache_dir)


def host_library() -> Path:
    """The library the installed onnxruntime wheel ships (the same one the host agent runs)."""
    import onnxruntime

    found = sorted((Path(onnxruntime.__file__).parent / "capi").glob("libonnxruntime.so.1.*"))
    if not found:
        raise NativeBuildError("the installed onnxruntime wheel has no capi/libonnxruntime.so.1.*")
    return found[0]


def _soname(library: Path) -> str:
    """libonnxruntime.so.1.32.0 -> libonnxruntime.so.1 (what the binary asks the loader for)."""
    stem, _, rest = library.name.partition(".so.")
    return f"{stem}.so.{rest.split('.')[0]}" if rest else library.name


def _stamp(target: str, headers: Path, library: Path, compiler: str) -> str:
    digest = hashlib.sha256(f"{target}\n{compiler}\n{sha256_file(library)}\n".encode())
    for path in sorted(SOURCE_DIR.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(f"{path.relative_to(SOURCE_DIR)}\n".encode() + path.read_bytes())
    digest.update((headers / "onnxruntime_c_api.h").read_bytes())
    return digest.hexdigest()


def build(
    target: str = "linux-x86_64", build_root: Path = DEFAULT_BUILD_ROOT, cache_dir: Path = DEFAULT_CACHE_DIR
) -> RunnerBuild:
    """The runner for `target`, built unless an identical build is already there."""
    if target not in TARGETS:
        raise NativeBuildError(f"unknown native runner target {target!r} (known: {', '.join(TARGETS)})")
    sdk = fetch_sdk(cache_dir)
    if target == "linux-x86_64":
        library, compiler, extra = host_library(), "c++", []
    else:
        library, compiler = fetch_aarch64_library(cache_dir), AARCH64_COMPILER
        extra = ["-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=aarch64"]
    where = build_root / target
    with exclusive(where):
        return _build(target, where, sdk, library, compiler, extra)


def _build(target: str, where: Path, sdk: Sdk, library: Path, compiler: str, extra: list[str]) -> RunnerBuild:
    runner_dir = where / "runner"
    stamp = _stamp(target, sdk.headers, library, compiler)
    stamp_file = where / "stamp"
    built = RunnerBuild(target, runner_dir / RUNNER_NAME, runner_dir / _soname(library))
    if (
        stamp_file.exists()
        and stamp_file.read_text() == stamp
        and built.binary.exists()
        and built.library.exists()
    ):
        return built
    shutil.rmtree(where, ignore_errors=True)
    runner_dir.mkdir(parents=True)
    shutil.copy2(library, built.library)
    tree = where / "cmake"
    _run(
        ["cmake", "-S", str(SOURCE_DIR), "-B", str(tree), "-DCMAKE_BUILD_TYPE=Release",
         f"-DCMAKE_CXX_COMPILER={compiler}", f"-DORT_INCLUDE_DIR={sdk.headers}",
         f"-DORT_LIBRARY={built.library}", *extra],
        f"configuring the {target} runner",
    )  # fmt: skip
    _run(["cmake", "--build", str(tree), "-j", str(os.cpu_count() or 2)], f"building the {target} runner")
    shutil.copy2(tree / RUNNER_NAME, built.binary)
    stamp_file.write_text(stamp)
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ondevice_farm_agents.android.native_build")
    parser.add_argument("action", choices=("fetch", "build"))
    parser.add_argument("target", nargs="?", default="linux-x86_64", choices=TARGETS)
    parser.add_argument(
        "--cache-dir", type=Path, default=Path(os.environ.get("FARM_NATIVE_CACHE", DEFAULT_CACHE_DIR))
    )
    parser.add_argument("--build-root", type=Path, default=DEFAULT_BUILD_ROOT)
    args = parser.parse_args(argv)
    try:
        if args.action == "fetch":
            fetch_all(args.cache_dir)
            print(f"native runner downloads are in {args.cache_dir}")
        else:
            print(build(args.target, build_root=args.build_root, cache_dir=args.cache_dir).binary)
    except FarmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
