"""On an agent host: `farm gc` there leaves the artifact a unit's job was shipped alone while it runs."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ondevice_farm.artifacts import pack_artifact
from ondevice_farm.config import FarmHome
from ondevice_farm.controller.actor import DeviceActorImpl, discover_units
from ondevice_farm.gc.leases import Lease
from ondevice_farm.gc.policy import RetentionPolicy
from ondevice_farm.gc.schedule import collect_once
from ondevice_farm.profiles import DEFAULT_PROFILES_DIR, load_profiles
from ondevice_farm.targets import parse_targets
from ondevice_farm_agents.base import AgentSettings, DeviceUnit, RunRequest
from ondevice_farm_agents.host.agent import HostAgent
from tests.compare.conftest import matmul_chain

GREEDY = RetentionPolicy(keep_runs=1, keep_days=0, min_idle_s=0)


class CollectingHostAgent(HostAgent):
    """The host agent, with `farm gc` run on its farm directory as the job starts on the unit."""

    home: FarmHome
    found: list[bool]

    def prepare(self, unit: DeviceUnit, request: RunRequest) -> None:
        collect_once(self.home, self.home.store_path, GREEDY)
        self.found.append(request.artifact.is_file())
        super().prepare(unit, request)


@pytest.mark.parametrize("leased", [True, False], ids=["leased", "control-without-lease"])
def test_gc_on_an_agent_host_keeps_a_running_jobs_shipped_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leased: bool
) -> None:
    home = FarmHome(tmp_path / "agent-home")
    model = matmul_chain(tmp_path / "m.onnx", 2, width=32)
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    # shipped by an earlier job long ago: the cache entry is old
    cached = home.root / "agent-artifacts" / sha / "m.onnx"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(model.read_bytes())
    old = time.time() - 90 * 86400
    os.utime(cached, (old, old))
    os.utime(cached.parent, (old, old))
    if not leased:
        monkeypatch.setattr(Lease, "hold", lambda self, *keys: None)
    found: list[bool] = []

    def agent(settings: AgentSettings) -> Any:
        made = CollectingHostAgent(settings)
        made.home, made.found = home, found
        return made

    settings = AgentSettings(profiles=load_profiles(DEFAULT_PROFILES_DIR))
    (unit, *_) = discover_units("host", settings)
    actor = DeviceActorImpl(unit, settings, cache_dir=str(home.root / "agent-artifacts"), agent_factory=agent)
    (target,) = parse_targets("ort/cpu") or []
    request = RunRequest(
        artifact=tmp_path / "on-the-controller" / "m.onnx",  # not on this host: the shipped copy runs
        artifact_sha256=sha,
        target=target,
        inputs={"x": np.ones((1, 32), np.float32)},
        warmup=0,
        runs=2,
        profile_ops=False,
    )
    if leased:
        done = actor.run_job(request, pack_artifact(model, sha))
        assert found == [True] and len(done.run.samples_ms) == 2 and cached.is_file()
    else:
        with pytest.raises(Exception):  # noqa: B017 - whatever the agent says of a missing file
            actor.run_job(request, pack_artifact(model, sha))
        assert found == [False] and not cached.exists()
