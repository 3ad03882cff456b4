"""A cancelled job on an Android unit: the detached native runner is killed on the unit, by the
pid its job wrote, over the real ADB wire protocol (the peer on loopback runs the runner for
real), and the job raises `JobCancelledError`. The runner's processes are counted before and after.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import psutil

from ondevice_farm.errors import JobCancelledError
from ondevice_farm.profiles import load_profiles
from ondevice_farm.targets import Target
from ondevice_farm_agents.android.native_build import RunnerBuild
from ondevice_farm_agents.android.native_runner import RUNNER_BINARY
from ondevice_farm_agents.base import AgentSettings, RunRequest
from tests.android.peer_fixtures import PeerHandle, one_unit

#: the poll that notices a cancel waits at most a second; the kill is one shell call
STOPPED_WITHIN_S = 10.0


def runner_processes(sandbox: Path) -> set[int]:
    """Processes running the native runner from this peer's sandbox."""
    found = set()
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = process.info["cmdline"] or []
        if process.info["status"] == psutil.STATUS_ZOMBIE or not cmdline:
            continue
        if cmdline[0].endswith(RUNNER_BINARY) and str(sandbox) in cmdline[0]:
            found.add(process.pid)
    return found


def test_a_cancel_kills_the_detached_runner_on_the_unit(
    native_runner: RunnerBuild, pixel8_peer: PeerHandle, small_model: tuple[Path, str, dict[str, np.ndarray]]
) -> None:
    path, sha, inputs = small_model
    # a sustained phase of ten minutes: the runner runs until something stops it
    request = RunRequest(path, sha, Target.parse("ort/cpu"), inputs, warmup=1, runs=3, sustained_s=600.0)
    settings = AgentSettings(
        profiles=load_profiles(),
        adb_tcp_addresses=(pixel8_peer.address,),
        adb_key_path=pixel8_peer.key_path,
        io_timeout_s=10,
    )
    before = runner_processes(pixel8_peer.sandbox)
    errors: list[BaseException] = []
    try:
        took_s = _run_and_cancel(pixel8_peer, settings, request, before, errors)
    finally:
        for pid in runner_processes(pixel8_peer.sandbox) - before:  # never left running on a failure
            psutil.Process(pid).kill()
    print(f"runner killed on the unit; the job ended {took_s:.2f} s after the cancel")


def _run_and_cancel(
    pixel8_peer: PeerHandle,
    settings: AgentSettings,
    request: RunRequest,
    before: set[int],
    errors: list[BaseException],
) -> float:
    with one_unit(settings) as (agent, unit):
        agent.prepare(unit, request)

        def job() -> None:
            try:
                agent.run(unit, request)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=job, daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while not runner_processes(pixel8_peer.sandbox) - before:
            assert thread.is_alive(), errors
            assert time.monotonic() < deadline, "the runner never started on the unit"
            time.sleep(0.1)
        running = runner_processes(pixel8_peer.sandbox) - before
        time.sleep(1.0)  # well inside its sustained phase

        began = time.monotonic()
        agent.cancel(unit)
        thread.join(STOPPED_WITHIN_S)
        took_s = time.monotonic() - began

    assert not thread.is_alive(), "the job still waits for the runner after the cancel"
    assert len(errors) == 1 and isinstance(errors[0], JobCancelledError), errors
    gone_by = time.monotonic() + 5
    while runner_processes(pixel8_peer.sandbox) & running and time.monotonic() < gone_by:
        time.sleep(0.1)
    assert not runner_processes(pixel8_peer.sandbox) & running, "the runner outlived the cancel"
    assert runner_processes(pixel8_peer.sandbox) == before
    return took_s
