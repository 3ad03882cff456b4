"""Faults on the link: the agent reports a lost or timed-out device, and the cache keeps
nothing half-written."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ondevice_farm.errors import DeviceLostError, DeviceTimeoutError
from ondevice_farm.targets import Target
from ondevice_farm_agents.android.keys import load_signer
from ondevice_farm_agents.android.transport import AdbConnection
from ondevice_farm_agents.base import AgentSettings, RunRequest
from tests.android.adb_peer import Fault
from tests.android.peer_fixtures import PeerHandle, one_unit

Model = tuple[Path, str, dict[str, np.ndarray]]


def _request(small_model: Model) -> RunRequest:
    path, sha, inputs = small_model
    return RunRequest(path, sha, Target.parse("ort/cpu"), inputs, warmup=1, runs=3, timeout_s=60)


def _complete_entries(sandbox: Path) -> list[Path]:
    return sorted((sandbox / "data/local/tmp/farm/cache").glob("*/complete"))


def test_link_dropped_mid_push_is_a_lost_device_and_leaves_no_cache_entry(
    adb_peer: PeerHandle, android_settings: AgentSettings, small_model: Model
) -> None:
    model_sha = small_model[1]
    adb_peer.peer.inject(Fault("drop", "push", match=model_sha, after_bytes=100))
    with one_unit(android_settings) as (agent, unit):
        with pytest.raises(DeviceLostError):
            agent.prepare(unit, _request(small_model))
        assert not (adb_peer.sandbox / f"data/local/tmp/farm/cache/{model_sha}/complete").exists()
        # The scheduler may retry on the same unit once it is back: the entry is pushed afresh.
        agent.prepare(unit, _request(small_model))
        run = agent.run(unit, _request(small_model))
    assert run.outputs["y"].shape == (2, 4)
    assert len(_complete_entries(adb_peer.sandbox)) == 3


def test_link_dropped_while_the_runner_runs_is_a_lost_device(
    adb_peer: PeerHandle, android_settings: AgentSettings, small_model: Model
) -> None:
    with one_unit(android_settings) as (agent, unit):
        agent.prepare(unit, _request(small_model))
        fault = adb_peer.peer.inject(Fault("drop", "shell", match="farm_runner.py", delay_s=0.05))
        with pytest.raises(DeviceLostError):
            agent.run(unit, _request(small_model))
    assert fault.fired.is_set()


def test_a_stalled_link_is_a_timeout_within_the_io_timeout(
    adb_peer: PeerHandle, android_settings: AgentSettings, small_model: Model
) -> None:
    with one_unit(replace(android_settings, io_timeout_s=1.0)) as (agent, unit):
        adb_peer.peer.inject(Fault("stall", "push", match=small_model[1]))
        with pytest.raises(DeviceTimeoutError):
            agent.prepare(unit, _request(small_model))


def test_a_corrupted_packet_is_a_lost_device(adb_peer: PeerHandle, android_settings: AgentSettings) -> None:
    with one_unit(android_settings) as (agent, unit):
        adb_peer.peer.inject(Fault("corrupt", "shell", match="dumpsys"))
        health = agent.health(unit)
    assert not health.up and "link failed" in health.reason


def test_a_job_past_its_deadline_is_a_timeout_and_is_killed(
    adb_peer: PeerHandle, android_settings: AgentSettings, small_model: Model
) -> None:
    path, sha, inputs = small_model
    # Two million timed runs take many seconds, far past the deadline, however fast the machine.
    request = RunRequest(path, sha, Target.parse("ort/cpu"), inputs, warmup=1, runs=2_000_000, timeout_s=0.5)
    with one_unit(android_settings) as (agent, unit):
        agent.prepare(unit, request)
        with pytest.raises(DeviceTimeoutError, match="deadline"):
            agent.run(unit, request)
    conn = AdbConnection(f"tcp:{adb_peer.address}", load_signer(adb_peer.key_path), io_timeout_s=5)
    try:
        assert conn.shell("pgrep -f 'farm_[r]unner'").output.strip() == ""
    finally:
        conn.close()
