"""The native generation runner (agents/ondevice_farm_agents/android/native_generate, C++ on
onnxruntime-genai's C API): built for this host and for aarch64, run on the tiny Llama (the aarch64 build
under qemu-user, with the aarch64 onnxruntime library), every timing of docs/generate.md present and the
greedy tokens and
first-step logits those of the host reference. result.json is read by the Android agent's own reader
(generate_result.generation_run), so what passes here is what the agent takes from a unit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ondevice_farm.generate.reference import greedy_reference
from ondevice_farm.generate.trace import FIRST_STEP_LOGITS_OUTPUT, TOKENS_OUTPUT, GenerationPlan
from ondevice_farm_agents.android.generate_job import cache_outputs
from ondevice_farm_agents.android.generate_result import generation_run
from ondevice_farm_agents.android.native_build import AARCH64_SYSROOT, NativeBuildError, fetch_aarch64_library
from ondevice_farm_agents.android.native_generate_build import build

pytestmark = pytest.mark.slow

SHIM = Path(__file__).resolve().parents[1] / "android" / "qemu" / "cpuinfo_shim.c"
PROMPT = (5, 17, 42, 99, 120, 7, 64, 33, 12, 250, 3, 77)
DECODE, REPS, DEPTHS = 10, 2, (0, 24)
DEPTH_IDS = tuple(range(10, 34))
PLAN = GenerationPlan(PROMPT, DECODE, DEPTHS, DEPTH_IDS, REPS, warmup=1)


def _args(folder: Path, out: Path) -> list[str]:
    # the cache tensors the Android agent names; none for a missing folder, whose error is the test
    kv = cache_outputs(folder) if (folder / "genai_config.json").is_file() else []
    return [
        "--model", str(folder), "--out", str(out), "--prompt-ids", ",".join(map(str, PROMPT)),
        "--decode", str(DECODE), "--reps", str(REPS), "--depths", ",".join(map(str, DEPTHS)),
        "--depth-ids", ",".join(map(str, DEPTH_IDS)),
        *(arg for name in kv for arg in ("--kv-output", name)),
    ]  # fmt: skip


def _check(out: Path, folder: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((out / "result.json").read_text())
    run = generation_run(result, PLAN)  # the agent's reader: it checks the reps against the plan
    trace = run.generation
    assert trace is not None and run.load_ms > 0 and run.warm_load_ms and trace.first_ttft_ms
    assert [r.depth for r in trace.reps] == [0, 0, 24, 24]
    for rep in trace.reps:
        assert rep.prefill_ms > 0 and rep.first_token_ms > 0 and rep.decode_span_ms > 0
        assert (rep.depth_prefill_ms > 0) == (rep.depth > 0)
    assert trace.rss_peak_bytes and trace.rss_before_bytes and trace.rss_peak_bytes > trace.rss_before_bytes
    # the cache read back after the deepest generation: depth + prompt + the tokens cached
    assert trace.kv_cache is not None and trace.kv_cache.source == "measured"
    assert trace.kv_cache.context_tokens >= 24 + len(PROMPT) + DECODE - 1
    reference = greedy_reference(folder, PROMPT, DECODE)
    assert run.outputs[TOKENS_OUTPUT].tolist() == reference["tokens"].tolist()  # every token agrees
    # another CPU's kernels (NEON vs AVX) may round differently in the last bits
    np.testing.assert_allclose(
        run.outputs[FIRST_STEP_LOGITS_OUTPUT], reference["first_step_logits"], rtol=1e-4, atol=1e-5
    )
    return result


def _ort_library() -> Path:
    import onnxruntime

    return next((Path(onnxruntime.__file__).parent / "capi").glob("libonnxruntime.so.1.*"))


def test_the_host_build_generates_what_the_reference_does(tmp_path: Path, tiny_llama: Path) -> None:
    try:
        runner = build("linux-x86_64", tmp_path / "build")
    except NativeBuildError as exc:
        pytest.fail(f"the generation runner could not be built: {exc} ({exc.hint})")
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "ORT_LIB_PATH": str(_ort_library())}
    done = subprocess.run([str(runner), *_args(tiny_llama, out)], capture_output=True, text=True, env=env,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    _check(out, tiny_llama)
    # a bad folder: one line on stderr, error.json, no result
    bad = tmp_path / "bad"
    bad.mkdir()
    failed = subprocess.run([str(runner), *_args(tmp_path / "missing", bad)], capture_output=True, text=True,
                            env=env, timeout=60, check=False)  # fmt: skip
    assert failed.returncode == 1 and "reading the model folder" in failed.stderr
    assert not (bad / "result.json").exists() and json.loads((bad / "error.json").read_text())["error"]


def test_the_aarch64_build_under_qemu_generates_what_the_reference_does(
    tmp_path: Path, tiny_llama: Path
) -> None:
    if shutil.which("qemu-aarch64") is None:
        pytest.fail("qemu-aarch64 is missing: install Debian's qemu-user")
    try:
        runner = build("linux-aarch64", tmp_path / "build")
        ort = fetch_aarch64_library()
    except NativeBuildError as exc:
        pytest.fail(f"the aarch64 generation runner could not be built: {exc} ({exc.hint})")
    shim = tmp_path / "cpuinfo_shim.so"
    subprocess.run(["aarch64-linux-gnu-gcc", "-shared", "-fPIC", "-O2", "-o", str(shim), str(SHIM), "-ldl"],
                   check=True)  # fmt: skip
    cpuinfo = tmp_path / "cpuinfo"
    entry = (
        "processor\t: {i}\nFeatures\t: fp asimd aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
        "asimdrdm "
        "lrcpc dcpop asimddp\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x4\n"
        "CPU part\t: 0xd0b\nCPU revision\t: 1\n\n"
    )
    cpuinfo.write_text("".join(entry.format(i=i) for i in range(os.cpu_count() or 1)))
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "QEMU_LD_PREFIX": str(AARCH64_SYSROOT)}
    done = subprocess.run(
        ["qemu-aarch64", "-E", f"LD_PRELOAD={shim}", "-E", f"FARM_FAKE_CPUINFO={cpuinfo}",
         "-E", f"ORT_LIB_PATH={ort}", str(runner), *_args(tiny_llama, out)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    _check(out, tiny_llama)
