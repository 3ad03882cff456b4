"""`farm submit DIR --devices pixel8 --generate ...`: a generation job on a unit reached over ADB.

The CLI, the embedded Ray and its DeviceActor, the AndroidAgent with the real adb-shell client, the
ADB peer on loopback answering getprop as a Pixel 8, and the farm's native generation runner (its
x86-64 build, against the installed onnxruntime-genai and onnxruntime wheels' libraries: the peer
runs the host's programs in its sandbox, as the ORT runner's test does) pushed into the peer's
push cache with the tiny Llama folder, run there detached, its result.json pulled back: every
figure of docs/generate.md measured on the unit, the tokens the host reference's.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import jsonschema
import psutil
import pytest
from click.testing import CliRunner

from ondevice_farm.artifacts import sha256_tree
from ondevice_farm.cli.main import cli
from ondevice_farm.errors import DeviceTimeoutError
from ondevice_farm.generate.trace import GenerationPlan
from ondevice_farm.targets import Target
from ondevice_farm_agents.android.native_build import NativeBuildError
from ondevice_farm_agents.android.native_build import build as build_ort_runner
from ondevice_farm_agents.android.native_generate_build import BINARY_NAME
from ondevice_farm_agents.android.native_generate_build import build as build_generation_runner
from ondevice_farm_agents.base import RunRequest
from tests.android.peer_fixtures import PeerHandle, one_unit, peer_settings

from .summaries import assert_percentiles, assert_summarises
from .tiny_llama import HEADS, HIDDEN_SIZE, KV_HEADS, LAYERS

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "farm/ondevice_farm/schema/run.schema.json").read_text())
CACHE = "data/local/tmp/farm/cache"
PROMPT, DECODE, REPS = 16, 8, 3


@pytest.fixture(scope="module")
def generation_runner() -> Path:
    """The generation runner built for this host into build/native/linux-x86_64/generate (where the
    agent looks), and the ORT runner's build beside it, whose libonnxruntime it loads. Neither
    downloads anything beyond what scripts/test fetches (native_build fetch)."""
    try:
        build_ort_runner("linux-x86_64")
        return build_generation_runner("linux-x86_64")
    except NativeBuildError as exc:
        pytest.fail(f"the generation runner could not be built: {exc} ({exc.hint})")


def _profiles_without_cooldown(tmp_path: Path) -> Path:
    directory = tmp_path / "profiles"
    if not directory.exists():
        shutil.copytree(REPO / "device_profiles", directory)
        pixel8 = directory / "pixel8.yaml"
        pixel8.write_text(pixel8.read_text().replace("cooldown_s: 30", "cooldown_s: 0"))
    return directory


def _submit(tmp_path: Path, peer: PeerHandle, folder: Path) -> dict[str, Any]:
    args = ["--home", str(tmp_path / "home"), "--profiles-dir", str(_profiles_without_cooldown(tmp_path))]
    args += ["submit", str(folder), "--devices", "pixel8", "--adb", peer.address]
    args += ["--generate", f"prompt={PROMPT},decode={DECODE},reps={REPS}", "--json"]
    result = CliRunner().invoke(cli, args, env={"FARM_ADB_KEY": str(peer.key_path)}, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr[-3000:]
    document: dict[str, Any] = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    return document


def test_a_generation_job_runs_on_a_pixel8_with_every_figure_measured(
    generation_runner: Path, pixel8_peer: PeerHandle, tiny_llama: Path, tmp_path: Path
) -> None:
    (job,) = _submit(tmp_path, pixel8_peer, tiny_llama)["jobs"]
    assert (job["device"], job["target"], job["status"]) == ("pixel8", "ort/cpu", "ok")
    assert job["runner"] == "farm generation runner (onnxruntime-genai C API)"
    gen = job["generation"]
    assert gen["source"] == "measured" and (gen["prompt_tokens"], gen["decode_tokens"]) == (PROMPT, DECODE)
    assert job["load_ms"] > 0 and job["warm_load_ms"] > 0
    assert job["warm_load_method"] == "second session in the same process"
    for figure in ("ttft_ms", "prefill_tokens_per_s", "decode_tokens_per_s"):
        assert_summarises(gen[figure], REPS)
    tokens = gen["token_latency_ms"]
    assert_percentiles(tokens, REPS * (DECODE - 1))
    assert len(job["latency_ms"]["samples"]) == REPS * (DECODE - 1)
    # the runner's own VmHWM above its VmRSS before the load, read on the unit
    assert job["peak_memory_mb"] > 0 and job["peak_memory_kind"] == "rss_delta"
    kv = gen["kv_cache"]
    # K and V per layer, fp32, read back from the runtime by the runner after the last generation
    assert kv["source"] == "measured" and kv["layers"] == LAYERS and kv["dtype"] == "float32", kv
    assert kv["bytes"] == 2 * LAYERS * KV_HEADS * (HIDDEN_SIZE // HEADS) * kv["context_tokens"] * 4
    assert kv["context_tokens"] >= PROMPT + DECODE - 1
    # numerics: the same greedy search on the same CPU kernels as the host reference
    agreement = gen["agreement"]
    assert agreement["share"] == 1.0 and agreement["first_divergence"] is None
    assert agreement["tokens"] == DECODE
    assert gen["first_step_logits_snr_db"] > 80
    assert job["reference"]["status"] == "passed"
    assert job["reference"]["outputs"]["tokens"]["exact_match"] == 1.0
    assert job["controls"]["affinity"] == "not pinned"
    # the folder is one cache entry under its tree's hash, every file in it, complete; the runner
    # executable in an entry of its own
    entry = pixel8_peer.sandbox / CACHE / sha256_tree(tiny_llama)
    assert (entry / "complete").exists()
    pushed = sorted(p.relative_to(entry / tiny_llama.name) for p in (entry / tiny_llama.name).rglob("*"))
    assert pushed == sorted(p.relative_to(tiny_llama) for p in tiny_llama.rglob("*"))
    (binary,) = (pixel8_peer.sandbox / CACHE).glob(f"*/{BINARY_NAME}")
    assert binary.stat().st_mode & 0o755 == 0o755

    # a second job pushes only its token ids: the folder, the runner and its libraries are cached
    before = len(pixel8_peer.peer.pushed)
    (again,) = _submit(tmp_path, pixel8_peer, tiny_llama)["jobs"]
    assert again["status"] == "ok" and again["generation"]["agreement"]["share"] == 1.0
    assert all(p.endswith("/prompt_ids.txt") for p in pixel8_peer.peer.pushed[before:])


def _request(folder: Path, timeout_s: float, reps: int = 1) -> RunRequest:
    plan = GenerationPlan(
        prompt_ids=(5, 17, 42, 99, 120, 7, 64, 33),
        decode_tokens=4,
        depths=(0, 24),
        depth_ids=tuple(range(10, 40)),
        reps=reps,
        warmup=1,
    )
    return RunRequest(
        folder, sha256_tree(folder), Target.parse("ort/cpu"), {}, timeout_s=timeout_s, generation=plan
    )


def test_a_damaged_folder_file_is_pushed_again_and_a_late_runner_is_stopped(
    generation_runner: Path, pixel8_peer: PeerHandle, tiny_llama: Path
) -> None:
    with one_unit(peer_settings(pixel8_peer)) as (agent, unit):
        run = agent.run(unit, _request(tiny_llama, timeout_s=120))
        assert run.generation is not None and [r.depth for r in run.generation.reps] == [0, 24]
        # the depth's ids went through a file: the cache at its end holds depth + prompt + decode
        assert run.generation.kv_cache is not None and run.generation.kv_cache.context_tokens >= 24 + 8 + 3
        data = pixel8_peer.sandbox / CACHE / sha256_tree(tiny_llama) / tiny_llama.name / "model.onnx.data"
        data.write_bytes(data.read_bytes()[:-16])
        before = len(pixel8_peer.peer.pushed)
        agent.prepare(unit, _request(tiny_llama, timeout_s=120))
        assert data.read_bytes() == (tiny_llama / "model.onnx.data").read_bytes()
        assert len(pixel8_peer.peer.pushed) - before == len(list(tiny_llama.iterdir()))
        # past its deadline the runner is stopped by pid, as the ORT runner is (jobs.run_detached):
        # two million generations take far longer than the second allowed, however fast the
        # machine, so the runner is still running at the deadline (a runner that ends before the
        # poll after it has a result: tests/android/test_detached_jobs.py)
        with pytest.raises(DeviceTimeoutError, match="deadline"):
            agent.run(unit, _request(tiny_llama, timeout_s=1.0, reps=2_000_000))
    deadline = time.monotonic() + 10
    while _runners(pixel8_peer.sandbox) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _runners(pixel8_peer.sandbox)


def _runners(sandbox: Path) -> list[int]:
    """Live generation runner processes started from the peer's sandbox."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = process.info["cmdline"] or []
        if cmdline and process.info["status"] != psutil.STATUS_ZOMBIE and cmdline[0].endswith(BINARY_NAME):
            found += [process.pid] if str(sandbox) in cmdline[0] else []
    return found
