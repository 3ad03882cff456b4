"""`farm submit --devices pixel8`: the native runner on a unit that answers getprop as a Pixel 8.

The CLI, the embedded Ray and its DeviceActor, the AndroidAgent with the real adb-shell client,
the ADB peer on loopback, and the farm's C++ runner (the x86-64 build, against the wheel's
libonnxruntime) pushed into the peer's sandbox and run there: the job comes back like a host-cpu
job, with samples, outputs checked against the host reference, per-op providers and versions.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import psutil
import pytest
from click.testing import CliRunner

from ondevice_farm.cli.main import cli
from ondevice_farm.errors import DeviceError, DeviceLostError
from ondevice_farm.targets import Target
from ondevice_farm_agents.android.native_build import RunnerBuild
from ondevice_farm_agents.android.native_runner import RUNNER_BINARY
from ondevice_farm_agents.base import RunRequest
from tests.android.adb_peer import Fault
from tests.android.peer_fixtures import PIXEL8, PeerHandle, one_unit, peer_settings, start_peer
from tests.scripted_warming import Ramp, ScriptedRamp

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "farm/ondevice_farm/schema/run.schema.json").read_text())
CACHE = "data/local/tmp/farm/cache"
JOBS = "data/local/tmp/farm/jobs"
HZ_PER_MHZ = 1e6
#: the Mali's clock through a sustained run: from 848 MHz down 200 MHz a second (synthetic; the
#: 848 MHz step is Tensor's, tests/android/fixtures/README.md), so each 0.5 s window reads its own
GPU_THROTTLE = Ramp(start=848.0, end=151.0, rate_per_s=-200.0)


def sustained_running(sandbox: Path) -> Callable[[], bool]:
    """Whether the runner's sustained run has begun in the peer's `sandbox`: a job's shell (whose
    pid the agent's detached job writes, agents/ondevice_farm_agents/android/jobs.py) runs the runner with
    `--sustained-s`."""

    def running() -> bool:
        for pid_file in (sandbox / JOBS).glob("*/pid"):
            try:
                shell = psutil.Process(int(pid_file.read_text()))
                if any("--sustained-s" in " ".join(c.cmdline()) for c in shell.children(recursive=True)):
                    return True
            except (ValueError, OSError, psutil.Error):
                continue
        return False

    return running


def _profiles_without_cooldown(tmp_path: Path) -> Path:
    """The shipped profiles, pixel8's 30 s pause between two jobs on one unit set to none."""
    directory = tmp_path / "profiles"
    shutil.copytree(REPO / "device_profiles", directory)
    pixel8 = directory / "pixel8.yaml"
    pixel8.write_text(pixel8.read_text().replace("cooldown_s: 30", "cooldown_s: 0"))
    return directory


def _submit(
    tmp_path: Path, key: Path, *addresses: str, devices: str = "pixel8", extra: tuple[str, ...] = ()
) -> Any:
    model = tmp_path / "tinynet.onnx"
    shutil.copy(REPO / "examples/tinynet.onnx", model)
    args = ["--home", str(tmp_path / "home"), "--profiles-dir", str(_profiles_without_cooldown(tmp_path))]
    args += ["submit", str(model), "--devices", devices]
    for address in addresses:
        args += ["--adb", address]
    args += ["--targets", "ort/cpu", "--runs", "10", "--warmup", "2", *extra, "--json"]
    return CliRunner().invoke(cli, args, env={"FARM_ADB_KEY": str(key)}, catch_exceptions=False)


def _check_the_native_runners_job(result: Any, native_runner: RunnerBuild, pixel8_peer: PeerHandle) -> None:
    """`farm submit` of tinynet on ort/cpu ran the native runner on the pixel8 (its job, checked
    whole) and left the runner in the unit's cache."""
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    (job,) = document["jobs"]
    assert (job["device"], job["target"], job["status"]) == ("pixel8", "ort/cpu", "ok")
    assert len(job["latency_ms"]["samples"]) == 10 and all(s > 0 for s in job["latency_ms"]["samples"])
    assert job["runner"].startswith("farm_native_runner 0.1.0 (Release), onnxruntime ")
    assert job["reference"]["passed"] is True
    assert job["ops"] and {op["provider"] for op in job["ops"]} == {"CPUExecutionProvider"}
    # pushed into the hash-addressed cache, complete and executable, its library beside it
    cache = pixel8_peer.sandbox / CACHE
    (binary,) = cache.glob(f"*/{RUNNER_BINARY}")
    assert (binary.parent / "complete").exists() and binary.stat().st_mode & 0o755 == 0o755
    assert list(cache.glob(f"*/{native_runner.library.name}"))


def test_a_sustained_run_and_warm_start_come_back_from_the_unit(
    native_runner: RunnerBuild, pixel8_peer: PeerHandle, tmp_path: Path
) -> None:
    extra = ("--sustained", "1.5s", "--sustained-window", "0.5", "--no-profile")
    # a Tensor phone's devfreq devices: its Mali GPU, from one of its clock steps (848 MHz) stepping
    # down while the sustained phase runs, and a memory-interface device the runner must not take
    # for a GPU (tests/android/fixtures/README.md)
    devfreq = pixel8_peer.sandbox / "sys/class/devfreq"
    (devfreq / "1f000000.mali").mkdir(parents=True)
    (devfreq / "17000010.devfreq_mif").mkdir()
    (devfreq / "17000010.devfreq_mif" / "cur_freq").write_text("3172000\n")
    throttling = ScriptedRamp(
        devfreq / "1f000000.mali" / "cur_freq",
        GPU_THROTTLE,
        HZ_PER_MHZ,
        sustained_running(pixel8_peer.sandbox),
    )
    with throttling:
        result = _submit(tmp_path, pixel8_peer.key_path, pixel8_peer.address, extra=extra)
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    (job,) = document["jobs"]
    assert job["warm_load_ms"] > 0 and job["warm_load_method"] == "second session in the same process"
    sustained = job["sustained"]
    assert sustained["source"] == "measured" and 2 <= len(sustained["windows"]) <= 4
    assert all(w["inferences"] > 0 and w["p50_ms"] > 0 for w in sustained["windows"])
    assert sustained["summary"]["inferences"] == sum(w["inferences"] for w in sustained["windows"])
    # the peer's sandbox reads this VM's sysfs, which exposes none of them: said, not zeroed
    assert any(u.startswith("CPU frequency") for u in sustained["unavailable"])
    assert sustained["summary"]["energy_mj_per_inference"] is None
    # the GPU's clock, read from the devfreq directory the agent named (the peer maps it), one reading
    # per window: stepping down through the run, each window reads a lower clock than the one before
    assert throttling.began_after_s is not None, "the runner's sustained phase was never seen"
    summary = sustained["summary"]
    clocks = [summary["start_gpu_freq_mhz"], *(w["gpu_freq_mhz"] for w in sustained["windows"])]
    assert clocks[0] <= GPU_THROTTLE.start, clocks
    assert all(GPU_THROTTLE.end < after < before for before, after in itertools.pairwise(clocks)), clocks
    assert summary["end_gpu_freq_mhz"] == clocks[-1]
    assert not any(u.startswith("GPU frequency") for u in sustained["unavailable"])


def _request(model: tuple[Path, str, dict[str, np.ndarray]]) -> RunRequest:
    path, sha, inputs = model
    return RunRequest(path, sha, Target.parse("ort/cpu"), inputs, warmup=1, runs=3, timeout_s=60)


def test_a_push_of_the_runner_cut_midway_leaves_no_entry_and_the_retry_runs(
    native_runner: RunnerBuild, pixel8_peer: PeerHandle, small_model: tuple[Path, str, dict[str, np.ndarray]]
) -> None:
    pixel8_peer.peer.inject(Fault("drop", "push", match=RUNNER_BINARY, after_bytes=4096))
    with one_unit(peer_settings(pixel8_peer)) as (agent, unit):
        with pytest.raises(DeviceLostError):
            agent.prepare(unit, _request(small_model))
        assert not list((pixel8_peer.sandbox / CACHE).glob(f"*/{RUNNER_BINARY}"))
        run = agent.run(unit, _request(small_model))
    assert run.outputs["y"].shape == (2, 4) and len(run.samples_ms) == 3


def test_a_link_cut_while_the_runner_runs_is_a_lost_device_and_writes_nothing_half(
    native_runner: RunnerBuild, pixel8_peer: PeerHandle, small_model: tuple[Path, str, dict[str, np.ndarray]]
) -> None:
    with one_unit(peer_settings(pixel8_peer)) as (agent, unit):
        agent.prepare(unit, _request(small_model))
        fault = pixel8_peer.peer.inject(Fault("drop", "shell", match=RUNNER_BINARY, delay_s=0.05))
        with pytest.raises(DeviceLostError):
            agent.run(unit, _request(small_model))
    assert fault.fired.is_set()
    # result.json is written through a rename: a job dir never holds a partial one
    assert not list((pixel8_peer.sandbox / "data/local/tmp/farm/jobs").glob("*/result.json.part"))


def test_submit_retries_a_job_whose_phone_drops_mid_push_on_another_phone(
    native_runner: RunnerBuild, pixel8_peer: PeerHandle, adb_key: Path, tmp_path: Path
) -> None:
    second = start_peer(tmp_path / "second-phone", adb_key, PIXEL8)
    try:
        pixel8_peer.peer.inject(Fault("drop", "push", match=RUNNER_BINARY, after_bytes=4096))
        addresses = (pixel8_peer.address, f"{second.host}:{second.port}")
        result = _submit(tmp_path, adb_key, *addresses, devices="pixel8,pixel8")
    finally:
        second.stop()
    assert result.exit_code == 0, result.stderr
    jobs = json.loads(result.stdout)["jobs"]
    assert len(jobs) == 2 and all(j["status"] == "ok" and j["reference"]["passed"] for j in jobs)
    (retried,) = [j for j in jobs if len(j["attempts"]) > 1]
    first = retried["attempts"][0]
    assert first["unit"].endswith(pixel8_peer.address) and "lost" in (first["error"] or "").lower()
    assert not retried["unit"].endswith(pixel8_peer.address)


def test_a_provider_the_runner_lacks_fails_the_job_with_the_runners_reason(
    native_runner: RunnerBuild, pixel8_peer: PeerHandle, small_model: tuple[Path, str, dict[str, np.ndarray]]
) -> None:
    path, sha, inputs = small_model
    request = RunRequest(path, sha, Target.parse("ort/xnnpack"), inputs, warmup=1, runs=3, timeout_s=60)
    with one_unit(peer_settings(pixel8_peer)) as (agent, unit), pytest.raises(DeviceError) as failed:
        agent.run(unit, request)
    assert "the native runner failed at load: appending XNNPACK" in str(failed.value)
    assert "not supported in this build" in str(failed.value)


def test_submit_runs_the_native_runner_on_a_pixel8_and_diverge_on_device_measures_its_layers(
    native_runner: RunnerBuild, pixel8_peer: PeerHandle, tmp_path: Path
) -> None:
    """A phone job has no per-layer curve from the host; `--on-device` runs the model once more on
    that unit, its intermediates exposed, and the curve comes back measured there. The submission
    is the plain one of the native runner on a pixel8, checked whole first (one submission for both:
    it was the same `farm submit` twice, a minute of the module)."""
    result = _submit(tmp_path, pixel8_peer.key_path, pixel8_peer.address)
    _check_the_native_runners_job(result, native_runner, pixel8_peer)
    run_id = json.loads(result.stdout)["run_id"]
    base = ["--home", str(tmp_path / "home"), "--profiles-dir", str(tmp_path / "profiles"), "diverge", run_id]
    env = {"FARM_ADB_KEY": str(pixel8_peer.key_path)}
    without = CliRunner().invoke(cli, [*base, "--json"], env=env, catch_exceptions=False)
    assert without.exit_code == 0, without.stderr
    assert "need the device" in json.loads(without.stdout)["missing"]["pixel8 ort/cpu"]

    done = CliRunner().invoke(
        cli, [*base, "--on-device", "--adb", pixel8_peer.address, "--json"], env=env, catch_exceptions=False
    )
    assert done.exit_code == 0, done.stderr
    layers = json.loads(done.stdout)
    (curve,) = [c for c in layers["curves"] if c["label"] == "pixel8 ort/cpu"]
    assert curve["source"] == "measured" and curve["method"] == "all" and curve["runs"] == 1
    assert "exposed as outputs" in curve["note"] and not layers["missing"]
    # fp32 CPU kernels on the unit: every intermediate tensor it returned stays near the reference
    assert len(curve["layers"]) > 20 and curve["first_divergent"] is None
    assert all(layer["snr_db"] is not None and layer["snr_db"] > 80 for layer in curve["layers"])
