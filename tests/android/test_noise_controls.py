"""Noise controls on Android: the native runner pins itself to the asked cores and sets ORT's
spinning, says what it applied, and the agent records that as `DeviceRun.controls`.

The runner is the host build, run directly and inside the ADB peer (a Pixel 8 identity); this
machine's own cores stand in for a phone's (a single core of its CPUs is the pinned set). The
aarch64 build pins itself under qemu-user too (test_aarch64_qemu.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ondevice_farm.errors import DeviceError, ProfileError, UsageError
from ondevice_farm.profiles import load_profiles, parse_profile
from ondevice_farm.targets import Target
from ondevice_farm_agents.android.agent import DEFAULT_PERF_TEST_PATH, PERF_TEST
from ondevice_farm_agents.android.native_build import RunnerBuild
from ondevice_farm_agents.android.perf_test import command_line
from ondevice_farm_agents.base import AgentSettings, RunRequest
from tests.android.peer_fixtures import PEER_IO_TIMEOUT_S, PeerHandle, one_unit

Model = tuple[Path, str, dict[str, np.ndarray]]
STANDIN = Path(__file__).parent / "adb_peer" / "perf_test_standin.py"


def _cores() -> tuple[int, list[int]]:
    """One core of those this process may use, and all of them; pinning shows only with two."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("pinning is indistinguishable from not pinning on a single CPU")
    return allowed[-1], allowed


def _absent_cpu() -> int:
    """A CPU number the kernel does not have."""
    possible = Path("/sys/devices/system/cpu/possible").read_text().strip()
    return int(possible.split("-")[-1].split(",")[-1]) + 1


def _runner(runner: RunnerBuild, model: Model, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    path, _, inputs = model
    out.mkdir(parents=True)
    feeds = []
    for name, array in inputs.items():
        np.save(out.parent / f"{name}.npy", array)
        feeds += ["--input", f"{name}={out.parent / f'{name}.npy'}"]
    argv = [str(runner.binary), "--model", str(path), "--out", str(out), *feeds, "--runs", "3", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_the_runner_pins_itself_and_its_runtime_threads_to_the_asked_core(
    native_runner: RunnerBuild, small_model: Model, tmp_path: Path
) -> None:
    core, allowed = _cores()
    done = _runner(
        native_runner, small_model, tmp_path / "pinned", "--cpus", str(core), "--allow-spinning", "0"
    )
    assert done.returncode == 0, done.stderr
    controls = json.loads((tmp_path / "pinned/result.json").read_text())["controls"]
    # read back from the kernel: the main thread's mask, and every thread's (ORT's pool included)
    assert controls["cpus_requested"] == controls["affinity"] == controls["threads_affinity"] == [core]
    # no thread count asked: one per pinned core, so ORT does not pin its own workers elsewhere
    assert (controls["threads"], controls["threads_source"]) == (1, "one per pinned CPU")
    assert controls["allow_spinning"] is False

    done = _runner(native_runner, small_model, tmp_path / "free", "--threads", "2")
    assert done.returncode == 0, done.stderr
    controls = json.loads((tmp_path / "free/result.json").read_text())["controls"]
    assert controls["cpus_requested"] is None and controls["affinity"] == allowed
    assert (controls["threads"], controls["threads_source"], controls["allow_spinning"]) == (2, "asked", None)


@pytest.mark.parametrize("kind", ["absent", "partly absent"])
def test_a_core_the_unit_lacks_fails_the_runner_in_one_line(
    native_runner: RunnerBuild, small_model: Model, tmp_path: Path, kind: str
) -> None:
    _, (core, *_) = _cores()  # the first: not adjacent to the absent one, so listed apart
    absent = _absent_cpu()
    cpus = str(absent) if kind == "absent" else f"{core},{absent}"
    done = _runner(native_runner, small_model, tmp_path / "out", "--cpus", cpus)
    assert done.returncode == 1
    error = json.loads((tmp_path / "out/error.json").read_text())
    assert error["stage"] == "affinity" and "\n" not in error["error"]
    online = Path("/sys/devices/system/cpu/online").read_text().strip()
    expected = (
        f"cannot pin to CPUs {absent}: Invalid argument (online: {online})"
        if kind == "absent"
        else f"asked for CPUs {core},{absent} but the kernel pinned to {core} (online: {online})"
    )
    assert error["error"] == expected
    assert not (tmp_path / "out/result.json").exists()


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--cpus", "4-x"], "--cpus takes CPU numbers (0-1023) like 4,5,6-7, not '4-x'"),
        (["--cpus", "7-4"], "--cpus range '7-4' runs backwards"),
        (["--allow-spinning", "yes"], "--allow-spinning takes 0 or 1, not 'yes'"),
    ],
)
def test_a_malformed_control_is_a_usage_error_on_the_first_line(
    native_runner: RunnerBuild, small_model: Model, tmp_path: Path, args: list[str], reason: str
) -> None:
    done = _runner(native_runner, small_model, tmp_path / "out", *args)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == f"farm_native_runner: {reason}"


def _request(model: Model, **controls: object) -> RunRequest:
    path, sha, inputs = model
    return RunRequest(path, sha, Target.parse("ort/cpu"), inputs, warmup=1, runs=3, timeout_s=60, **controls)  # type: ignore[arg-type]


def _settings(peer: PeerHandle, runner_kind: str = "") -> AgentSettings:
    profiles = load_profiles()
    if runner_kind:
        pixel8 = profiles["pixel8"]
        profiles["pixel8"] = dataclasses.replace(pixel8, runner={**pixel8.runner, "kind": runner_kind})
    return AgentSettings(
        profiles=profiles,
        adb_tcp_addresses=(peer.address,),
        adb_key_path=peer.key_path,
        io_timeout_s=PEER_IO_TIMEOUT_S,
    )


def test_the_agent_pins_the_runner_on_a_unit_and_records_what_it_applied(
    native_runner: RunnerBuild, pixel8_peer: PeerHandle, small_model: Model
) -> None:
    core, _ = _cores()
    pinned = _request(small_model, cpu_affinity=(core,), allow_spinning=False)
    free = _request(small_model, intra_op_threads=2)
    with one_unit(_settings(pixel8_peer)) as (agent, unit):
        run = agent.run(unit, pinned)
        assert run.controls == {"threads": "1", "affinity": str(core), "spinning": "off"}
        assert any("one per pinned CPU" in note for note in run.notes)
        # a repeat's session is a runner process of its own: what it reported is what is recorded
        assert len(agent.measure_session(unit, pinned)) == 3
        assert agent.session_controls(unit, pinned) == run.controls

        run = agent.run(unit, free)
    assert run.controls == {"threads": "2", "affinity": "not pinned", "spinning": "runtime default"}


def test_a_core_the_unit_lacks_fails_the_job_in_one_readable_line(
    native_runner: RunnerBuild, pixel8_peer: PeerHandle, small_model: Model
) -> None:
    absent = _absent_cpu()
    online = Path("/sys/devices/system/cpu/online").read_text().strip()
    with one_unit(_settings(pixel8_peer)) as (agent, unit):
        with pytest.raises(DeviceError) as failed:
            agent.run(unit, _request(small_model, cpu_affinity=(absent,)))
        message = str(failed.value)
        assert "\n" not in message
        reason = f"cannot pin to CPUs {absent}: Invalid argument (online: {online})"
        assert message.endswith(f"the native runner failed at affinity: {reason}")
        with pytest.raises(UsageError, match=r"CPU affinity takes CPU numbers \(0, 1, \.\.\.\), not \[-1\]"):
            agent.run(unit, _request(small_model, cpu_affinity=(-1,)))


def test_perf_test_takes_threads_and_spinning_and_records_affinity_as_not_controllable(
    pixel8_peer: PeerHandle, small_model: Model
) -> None:
    argv = command_line(
        "perf_test", "m.onnx", Target.parse("ort/nnapi"), 5, allow_spinning=False, disable_cpu_fallback=True
    )
    # one -C: perf_test keeps only the last of a repeated flag
    assert argv.count("-C") == 1
    assert argv[argv.index("-C") + 1] == "session.intra_op.allow_spinning|0 session.disable_cpu_ep_fallback|1"

    # perf_test at the profile's path: a wrapper that keeps its argv, then runs the stand-in
    binary = pixel8_peer.sandbox / DEFAULT_PERF_TEST_PATH.lstrip("/")
    binary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(STANDIN, binary.parent / STANDIN.name)
    binary.write_text(
        f'#!/bin/sh\necho "$@" >> "$(dirname "$0")/argv.log"\nexec "$(dirname "$0")/{STANDIN.name}" "$@"\n'
    )
    binary.chmod(0o755)
    (binary.parent / STANDIN.name).chmod(0o755)
    request = _request(small_model, cpu_affinity=(0,), allow_spinning=True, intra_op_threads=2)
    with one_unit(_settings(pixel8_peer, PERF_TEST)) as (agent, unit):
        run = agent.run(unit, request)
        assert agent.session_controls(unit, request) == run.controls
    assert run.controls == {"threads": "2", "affinity": "not controllable", "spinning": "on"}
    calls = (binary.parent / "argv.log").read_text().splitlines()
    assert calls and all("-x 2 " in c and "-C session.intra_op.allow_spinning|1" in c for c in calls)


def test_profiles_name_their_performance_cores(tmp_path: Path) -> None:
    profiles = load_profiles()
    assert profiles["pixel8"].performance_cores == (4, 5, 6, 7, 8)
    assert profiles["galaxy-s24"].performance_cores == (2, 3, 4, 5, 6, 7)
    assert profiles["galaxy-s24-exynos"].performance_cores == (4, 5, 6, 7, 8, 9)
    assert profiles["host-cpu"].performance_cores == ()


@pytest.mark.parametrize(
    ("platform", "cores", "reason"),
    [
        (
            "android",
            [4, "5"],
            r"field 'performance_cores' must list CPU numbers, e\.g\. \[4, 5, 6, 7\], got \[4, '5'\]",
        ),
        ("android", [], r"field 'performance_cores' must list CPU numbers"),
        ("android", [-1], r"field 'performance_cores' must list CPU numbers"),
        ("android", [True], r"field 'performance_cores' must list CPU numbers"),
        ("android", [4, 4], r"field 'performance_cores' lists a CPU twice: \[4, 4\]"),
        ("android", "4-7", r"field 'performance_cores' must be a list, got str"),
        ("ios", [4], r"field 'performance_cores' is not for ios"),
    ],
)
def test_a_bad_performance_cores_field_names_the_file_and_the_field(
    tmp_path: Path, platform: str, cores: object, reason: str
) -> None:
    data = {"name": "x", "platform": platform, "targets": ["ort/cpu"], "performance_cores": cores}
    with pytest.raises(ProfileError, match=rf"^{re.escape(str(tmp_path / 'x.yaml'))}: {reason}"):
        parse_profile(data, tmp_path / "x.yaml")
