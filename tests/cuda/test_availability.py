"""host-cuda availability with more than one distribution of `onnxruntime` installed.

The case that made us change it, seen on the H200 check machine (fixtures/README.md): the CPU
wheel onnxruntime 1.30 in site-packages and onnxruntime-gpu 1.31.1 earlier on PYTHONPATH. The
GPU wheel's module was the one imported and CUDA sessions ran, yet host-cuda was reported absent
because two distributions were installed. A second distribution is now named only where the
CUDA provider is unusable, as the likely cause.

The second distribution is made for real where a test needs one: a `.dist-info` directory on
`sys.path` is exactly what `importlib.metadata` finds for an installed wheel whose module is
shadowed.
"""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort
import pytest

from ondevice_farm_agents.host.cuda import (
    CUDA_PROVIDER,
    INSTALL_HINT,
    REINSTALL_HINT,
    CudaOptions,
    RuntimeWheel,
    SessionProbe,
    cuda_availability,
    judge_availability,
    runtime_wheels,
)

FIXTURES = Path(__file__).parent / "fixtures"
GPU_WHEEL_HERE = CUDA_PROVIDER in ort.get_available_providers()


def install_metadata(site: Path, name: str, version: str) -> None:
    """A distribution's metadata as pip leaves it, without its module (the shadowed one's case)."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


# The H200 machine's two distributions, as `runtime_wheels()` would describe them (paths illustrative).
CPU_WHEEL_SHADOWED = RuntimeWheel("onnxruntime", "1.30.0", "/usr/local/lib/python3.12/dist-packages", False)
GPU_WHEEL_IMPORTED = RuntimeWheel("onnxruntime-gpu", "1.31.1", "/opt/farm/pythonpath", True)


def test_a_shadowed_cpu_wheel_does_not_make_a_working_gpu_absent() -> None:
    probe = SessionProbe(listed=True, providers=(CUDA_PROVIDER, "CPUExecutionProvider"))
    verdict = judge_availability(probe, [CPU_WHEEL_SHADOWED, GPU_WHEEL_IMPORTED], "1.31.1", CudaOptions())
    assert verdict.available and verdict.reason == ""
    assert verdict.details is not None
    assert verdict.details["onnxruntime_shadowed"] == (
        "onnxruntime 1.30.0 (/usr/local/lib/python3.12/dist-packages)"
    )


def test_two_wheels_are_named_as_the_likely_cause_when_cuda_cannot_start() -> None:
    failure = (FIXTURES / "cuda_provider_load_failure_linux_ort1.16.log").read_text()
    probe = SessionProbe(listed=True, providers=("CPUExecutionProvider",), log=failure)
    site = "/usr/lib/python3/dist-packages"
    one_place = [
        RuntimeWheel("onnxruntime", "1.16.0", site, True),
        RuntimeWheel("onnxruntime-gpu", "1.16.0", site, True),
    ]
    verdict = judge_availability(probe, one_place, "1.16.0", CudaOptions())
    assert not verdict.available
    assert verdict.reason.startswith(f"{CUDA_PROVIDER} is installed but cannot start: ")
    assert "libcublasLt.so.11: cannot open shared object file" in verdict.reason
    assert "installed in one place and overwrite each other's files" in verdict.reason
    assert verdict.reason.endswith(REINSTALL_HINT)


def test_a_session_that_fell_back_to_the_cpu_is_absent_whatever_the_wheels() -> None:
    probe = SessionProbe(listed=True, providers=("CPUExecutionProvider",))
    verdict = judge_availability(probe, [GPU_WHEEL_IMPORTED], "1.31.1", CudaOptions())
    assert not verdict.available
    assert (
        verdict.reason
        == f"{CUDA_PROVIDER} is installed but cannot start: the session ran on ['CPUExecutionProvider']"
    )


@pytest.mark.skipif(GPU_WHEEL_HERE, reason="onnxruntime-gpu is imported here")
def test_here_the_cpu_wheel_shadows_an_installed_gpu_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mirror image of the H200 case, for real: the CPU wheel imported, the GPU one behind it."""
    install_metadata(tmp_path, "onnxruntime-gpu", "1.31.1")
    monkeypatch.syspath_prepend(str(tmp_path))
    wheels = {w.name: w for w in runtime_wheels()}
    assert wheels["onnxruntime"].imported and not wheels["onnxruntime-gpu"].imported
    assert wheels["onnxruntime-gpu"].location == str(tmp_path.resolve())
    verdict = cuda_availability()
    assert not verdict.available
    assert f"has no {CUDA_PROVIDER} (the CPU-only wheel)" in verdict.reason
    assert f"which shadows onnxruntime-gpu 1.31.1 ({tmp_path.resolve()})" in verdict.reason
    assert verdict.reason.endswith(REINSTALL_HINT)


@pytest.mark.skipif(GPU_WHEEL_HERE, reason="onnxruntime-gpu is imported here")
def test_here_one_cpu_wheel_gets_the_install_hint() -> None:
    verdict = cuda_availability()
    assert [w.name for w in runtime_wheels()] == ["onnxruntime"]
    assert not verdict.available and verdict.reason.endswith(INSTALL_HINT)


@pytest.mark.skipif(not cuda_availability().available, reason="needs a usable CUDA provider")
def test_on_a_gpu_a_shadowed_cpu_wheel_leaves_host_cuda_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The H200 case itself: CPU wheel metadata found first, the GPU wheel's module imported."""
    install_metadata(tmp_path, "onnxruntime", "1.30.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    verdict = cuda_availability()
    assert verdict.available, verdict.reason
    assert verdict.details is not None and "onnxruntime 1.30.0" in verdict.details["onnxruntime_shadowed"]
