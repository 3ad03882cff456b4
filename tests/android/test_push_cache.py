"""The push cache on the unit: pushed once, re-pushed when damaged, oldest entries evicted."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, RunRequest
from tests.android.peer_fixtures import PeerHandle, one_unit

Model = tuple[Path, str, dict[str, np.ndarray]]


def _request(small_model: Model, path: Path | None = None, sha: str | None = None) -> RunRequest:
    model, model_sha, inputs = small_model
    return RunRequest(path or model, sha or model_sha, Target.parse("ort/cpu"), inputs, warmup=1, runs=2)


def test_a_second_job_with_the_same_files_pushes_nothing(
    adb_peer: PeerHandle, android_settings: AgentSettings, small_model: Model
) -> None:
    with one_unit(android_settings) as (agent, unit):
        agent.prepare(unit, _request(small_model))
        first = list(adb_peer.peer.pushed)
        agent.prepare(unit, _request(small_model))
    assert len(first) == 3  # model, inputs, runner script
    assert adb_peer.peer.pushed == first
    assert any(f"/cache/{small_model[1]}/" in p for p in first)


def test_a_damaged_entry_is_pushed_again(
    adb_peer: PeerHandle, android_settings: AgentSettings, small_model: Model
) -> None:
    with one_unit(android_settings) as (agent, unit):
        agent.prepare(unit, _request(small_model))
        on_device = adb_peer.sandbox / f"data/local/tmp/farm/cache/{small_model[1]}/model.onnx"
        on_device.write_bytes(on_device.read_bytes()[:-10])
        agent.prepare(unit, _request(small_model))
    assert on_device.read_bytes() == small_model[0].read_bytes()
    assert len(adb_peer.peer.pushed) == 4


def test_over_the_size_limit_the_least_recently_used_entries_go(
    adb_peer: PeerHandle, android_settings: AgentSettings, small_model: Model, tmp_path: Path
) -> None:
    import hashlib

    # A limit of one byte: each job keeps only its own entries.
    settings = replace(android_settings, extra={"adb_cache_limit_bytes": "1"})
    other = tmp_path / "other.onnx"
    other.write_bytes(small_model[0].read_bytes() + b"\n")  # trailing bytes: a different file, same model
    other_sha = hashlib.sha256(other.read_bytes()).hexdigest()
    with one_unit(settings) as (agent, unit):
        agent.prepare(unit, _request(small_model))
        agent.prepare(unit, _request(small_model, other, other_sha))
    cache = adb_peer.sandbox / "data/local/tmp/farm/cache"
    assert (cache / other_sha / "complete").exists()
    assert not (cache / small_model[1]).exists()
