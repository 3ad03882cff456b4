"""A host session process gets OMP_NUM_THREADS as the user had it, not the 1 Ray puts in its
workers (the DeviceActor is one): onnxruntime-genai's and numpy's pools size from it, and a tiny
model's decode measured 3.4% slower with Ray's value."""

from __future__ import annotations

import sys

import pytest

from ondevice_farm_agents.base import AgentSettings
from ondevice_farm_agents.host.agent import HostAgent

SHOW = [sys.executable, "-c", "import os; print(os.environ.get('OMP_NUM_THREADS', '<unset>'))"]


@pytest.mark.parametrize(("users", "seen"), [(None, "<unset>"), ("4", "4")])
def test_a_session_process_sees_the_users_value(
    monkeypatch: pytest.MonkeyPatch, users: str | None, seen: str
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as in a Ray worker
    agent = HostAgent(AgentSettings(session_omp_num_threads=users))
    (unit,) = agent.discover()
    stdout, _, returncode = agent._process(unit, SHOW, "", timeout_s=60)
    assert returncode == 0 and stdout.strip() == seen
