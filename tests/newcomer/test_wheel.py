"""The built wheel, installed alone in a fresh virtual environment, runs the farm's main job.

scripts/test builds the wheel (`pip wheel . --no-deps`) and installs it with its dependencies into a
venv of its own before the network goes, and names both here (FARM_TEST_WHEEL,
FARM_TEST_WHEEL_VENV). Everything runs from a temporary directory, so nothing of the checkout is on
the path: what the wheel lacks, these tests lack.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEEL = os.environ.get("FARM_TEST_WHEEL")
VENV = os.environ.get("FARM_TEST_WHEEL_VENV")

pytestmark = pytest.mark.skipif(
    not (WHEEL and VENV), reason="scripts/test builds the wheel and its venv (FARM_TEST_WHEEL, _VENV)"
)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["FARM_HOME"] = str(home / "farm-home")
    return env


def _run(args: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=_env(cwd), capture_output=True, text=True, timeout=timeout_s, check=False
    )


def test_wheel_carries_profiles_sources_and_schemas() -> None:
    assert WHEEL is not None
    names = set(zipfile.ZipFile(WHEEL).namelist())
    profiles = {p.name for p in (ROOT / "device_profiles").glob("*.yaml")}
    assert {f"ondevice_farm/device_profiles/{name}" for name in profiles} <= names
    for runner in ("native", "native_generate"):
        native = ROOT / "agents" / "ondevice_farm_agents" / "android" / runner
        sources = {str(p.relative_to(native)) for p in native.rglob("*") if p.is_file()}
        assert "CMakeLists.txt" in sources
        assert {f"ondevice_farm_agents/android/{runner}/{name}" for name in sources} <= names
    assert any(n.startswith("ondevice_farm/schema/") and n.endswith(".json") for n in names)
    assert not any(n.startswith(("tests/", "benchmarks/", "scripts/")) for n in names)


def test_installed_farm_lists_devices_and_submits(tmp_path: Path) -> None:
    farm = Path(str(VENV)) / "bin" / "farm"
    devices = _run([str(farm), "devices"], tmp_path, 120)
    assert devices.returncode == 0, devices.stderr[-2000:]
    assert "host-cpu" in devices.stdout
    shutil.copy2(ROOT / "examples" / "tinynet.onnx", tmp_path / "tinynet.onnx")
    submitted = _run(
        [str(farm), "submit", "tinynet.onnx", "-d", "host-cpu", "--runs", "20", "--json"], tmp_path, 240
    )
    assert submitted.returncode == 0, submitted.stderr[-2000:]
    job = json.loads(submitted.stdout)["jobs"][0]
    assert job["latency_ms"]["p50"] > 0
    # the installed package answered, not the checkout
    where = _run([str(Path(str(VENV)) / "bin" / "python"), "-c",
                  "import ondevice_farm; print(ondevice_farm.__file__)"], tmp_path, 60)  # fmt: skip
    assert str(VENV) in where.stdout and str(ROOT / "farm") not in where.stdout


def test_installed_farm_builds_the_native_runner(tmp_path: Path) -> None:
    if shutil.which("cmake") is None or shutil.which("c++") is None:
        pytest.fail("cmake and a C++ compiler are part of the test environment (scripts/test)")
    python = Path(str(VENV)) / "bin" / "python"
    built = _run(
        [str(python), "-m", "ondevice_farm_agents.android.native_build", "build", "linux-x86_64",
         "--build-root", str(tmp_path / "native")],
        tmp_path, 600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    binary = Path(built.stdout.strip().splitlines()[-1])
    assert binary.is_file() and binary.is_relative_to(tmp_path / "native")
    assert os.access(binary, os.X_OK)
