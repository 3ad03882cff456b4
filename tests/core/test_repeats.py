"""Repeats on the host, for real: each session after the first in a fresh process."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from ondevice_farm.errors import DeviceError
from ondevice_farm.inputs import resolve_shapes, seeded_inputs
from ondevice_farm.model import inspect_model
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, RunRequest
from ondevice_farm_agents.host.agent import HostAgent
from ondevice_farm_agents.repeats import run_repeats

from .conftest import farm, farm_json

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json").read_text()
)


def request(model: Path, repeats: int) -> RunRequest:
    info = inspect_model(model)
    return RunRequest(
        artifact=model,
        artifact_sha256=info.sha256,
        target=Target.parse("ort/cpu"),
        inputs=seeded_inputs(info, resolve_shapes(info, {}), 0),
        warmup=1,
        runs=4,
        repeats=repeats,
        profile_ops=False,
    )


def test_a_job_measures_in_as_many_sessions_as_asked(model: Path) -> None:
    agent = HostAgent(AgentSettings())
    (unit,) = agent.discover()
    run = run_repeats(agent, unit, request(model, 3))
    assert [len(s) for s in run.repeat_samples_ms] == [4, 4, 4]
    assert run.repeat_samples_ms[0] == run.samples_ms and run.peak_memory_kind == "rss_delta"
    assert all(v > 0 for s in run.repeat_samples_ms for v in s)


def test_a_repeat_that_cannot_load_fails_with_one_line(model: Path, tmp_path: Path) -> None:
    agent = HostAgent(AgentSettings())
    (unit,) = agent.discover()
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    bad = RunRequest(**{**request(model, 2).__dict__, "artifact": broken})
    with pytest.raises(DeviceError, match="a repeat's session failed") as info:
        agent.measure_session(unit, bad)
    assert "\n" not in str(info.value)


def test_submit_repeats_keeps_every_session(home: Path, model: Path, ray_session: None) -> None:
    document = farm_json(home, "submit", str(model), "--runs", "5", "--repeats", "2", "--no-profile")
    jsonschema.validate(document, SCHEMA)
    assert document["settings"]["repeats"] == 2
    (job,) = document["jobs"]
    latency = job["latency_ms"]
    assert [len(r["samples"]) for r in latency["repeats"]] == [5, 5] and len(latency["samples"]) == 10
    assert latency["spread"]["sessions"] == 2 and latency["p50_definition"].startswith("geometric mean")
    assert job["peak_memory_kind"] == "rss_delta"


def test_repeats_below_one_is_refused(home: Path, model: Path) -> None:
    result = farm(home, "submit", str(model), "--repeats", "0")
    assert result.exit_code == 2 and "--repeats must be at least 1" in result.stderr
