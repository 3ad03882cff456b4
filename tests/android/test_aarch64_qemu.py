"""The runner cross-built for aarch64 (Debian's g++-aarch64-linux-gnu, the aarch64 onnxruntime
wheel's library) and run under qemu-user: its outputs match the host's onnxruntime, and it pins
itself to the core it is given (qemu-user passes sched_setaffinity through to this kernel).

Bounded: the build is cached in build/native, the model is the small MatMul one, and qemu runs
it a handful of times (tinynet takes seconds per inference under emulation).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from ondevice_farm_agents.android.native_build import AARCH64_SYSROOT, NativeBuildError, build

pytestmark = pytest.mark.slow

SHIM = Path(__file__).parent / "qemu" / "cpuinfo_shim.c"
QEMU = "qemu-aarch64"
QEMU_TIMEOUT_S = 240


def _fake_cpuinfo(path: Path) -> Path:
    """An ARM /proc/cpuinfo (Cortex-A76 cores) with one entry per CPU the kernel may report."""
    possible = Path("/sys/devices/system/cpu/possible").read_text().strip()
    last = int(possible.split("-")[-1].split(",")[-1])
    entry = (
        "processor\t: {i}\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics "
        "fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
        "CPU variant\t: 0x4\nCPU part\t: 0xd0b\nCPU revision\t: 1\n\n"
    )
    path.write_text("".join(entry.format(i=i) for i in range(last + 1)))
    return path


def test_the_aarch64_build_under_qemu_matches_the_host_reference(
    small_model: tuple[Path, str, dict[str, np.ndarray]], tmp_path: Path
) -> None:
    if shutil.which(QEMU) is None:
        pytest.fail("qemu-aarch64 is missing: install Debian's qemu-user")
    try:
        runner = build("linux-aarch64")
    except NativeBuildError as exc:
        pytest.fail(f"the aarch64 runner could not be built: {exc} ({exc.hint})")
    shim = tmp_path / "cpuinfo_shim.so"
    subprocess.run(
        ["aarch64-linux-gnu-gcc", "-shared", "-fPIC", "-O2", "-o", str(shim), str(SHIM), "-ldl"], check=True
    )
    model, _, inputs = small_model
    ((name, array),) = inputs.items()
    np.save(tmp_path / "x.npy", array)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "QEMU_LD_PREFIX": str(AARCH64_SYSROOT)}
    cpuinfo = _fake_cpuinfo(tmp_path / "cpuinfo")
    core = max(os.sched_getaffinity(0))
    done = subprocess.run(
        [
            QEMU, "-E", f"LD_PRELOAD={shim}", "-E", f"FARM_FAKE_CPUINFO={cpuinfo}", str(runner.binary),
            "--model", str(model), "--out", str(out), "--input", f"{name}={tmp_path / 'x.npy'}",
            "--warmup", "1", "--runs", "3", "--profile-runs", "2", "--cpus", str(core),
        ],
        capture_output=True, text=True, timeout=QEMU_TIMEOUT_S, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["ort_version"] == "1.28.0" and result["ort_api_version"] == 28
    assert len(result["samples_ms"]) == 3
    # the runner's own threads; `threads_affinity` also counts qemu-user's helper thread, which
    # started before the runner pinned itself, so it is left out here
    assert result["controls"]["cpus_requested"] == result["controls"]["affinity"] == [core]
    assert result["controls"]["threads"] == 1
    (expected,) = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, inputs)
    got = np.load(out / result["outputs"][0]["file"], allow_pickle=False)
    # another CPU's kernels (NEON vs AVX) may round differently in the last bits
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    providers = {
        e["args"]["provider"]
        for e in json.loads((out / "profile.json").read_text())
        if e.get("cat") == "Node"
    }
    assert providers == {"CPUExecutionProvider"}
