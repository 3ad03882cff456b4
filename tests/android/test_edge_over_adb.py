"""ExecuTorch (`.pte`) and LiteRT (`.tflite`) jobs on an Android unit, at the agent's protocol boundary.

`farm submit cnn.pt2 --devices pixel8 --adb ADDR -t executorch/xnnpack,litert/xnnpack`: the CLI, the
embedded Ray, the AndroidAgent with the real adb-shell client, and the ADB peer on loopback answering
getprop as a Pixel 8. No Android build of either runtime can be made on this machine (no NDK;
docs/android.md has the recipe), so the unit's python3 is this checkout's interpreter: the host
build of executorch and ai-edge-litert runs `edge_runner.py` in the peer's sandbox, as the ORT runner
was tested before its native build existed. The profile is the shipped pixel8 with the runner kind a
unit with such a python3 takes (`farm-runner`); the shipped one (`native`) refuses, tested below.
Everything crosses the wire as on a phone: program, inputs, script and session module pushed into
the hash-addressed cache; result.json, outputs.npz and ExecuTorch's ETDump pulled back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from ondevice_farm.cli.main import cli
from ondevice_farm.errors import DeviceError, UsageError
from ondevice_farm.profiles import DEFAULT_PROFILES_DIR, load_profiles
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, RunRequest
from tests.android.peer_fixtures import PEER_IO_TIMEOUT_S, PeerHandle, one_unit

pytest.importorskip("executorch", reason="ExecuTorch jobs need it: pip install 'ondevice-farm[executorch]'")
pytest.importorskip("ai_edge_litert", reason="LiteRT jobs need it: pip install 'ondevice-farm[litert]'")

from ..torch_source.architectures import save_exported

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "farm/ondevice_farm/schema/run.schema.json").read_text())
TARGETS = ("executorch/xnnpack", "litert/xnnpack")
RUNS = 5


def _profiles_with_python_runner(root: Path) -> Path:
    """The shipped profiles, pixel8's runner switched to the unit's python3 (`farm-runner`)."""
    profiles = root / "profiles"
    shutil.copytree(DEFAULT_PROFILES_DIR, profiles)
    pixel8 = yaml.safe_load((profiles / "pixel8.yaml").read_text())
    pixel8["runner"] = {"kind": "farm-runner", "python": "python3"}
    (profiles / "pixel8.yaml").write_text(yaml.safe_dump(pixel8))
    return profiles


def _submit(peer: PeerHandle, root: Path) -> dict[str, Any]:
    checkpoint = save_exported("cnn", root / "cnn.pt2")
    result = CliRunner().invoke(
        cli,
        [
            "--home",
            str(root / "home"),
            "--profiles-dir",
            str(_profiles_with_python_runner(root)),
            "submit",
            str(checkpoint),
            "--devices",
            "pixel8",
            "--adb",
            peer.address,
            "-t",
            ",".join(TARGETS),
            "--runs",
            str(RUNS),
            "--warmup",
            "1",
            "--repeats",
            "2",
            "--json",
        ],
        env={"FARM_ADB_KEY": str(peer.key_path)},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    return document


def test_pte_and_tflite_run_on_a_pixel8_over_adb(pixel8_peer: PeerHandle, tmp_path: Path) -> None:
    jobs = {job["target"]: job for job in _submit(pixel8_peer, tmp_path)["jobs"]}
    assert set(jobs) == set(TARGETS)
    for target, job in jobs.items():
        assert (job["device"], job["status"]) == ("pixel8", "ok"), (target, job.get("error"))
        assert job["unit"] == f"tcp:{pixel8_peer.address}"
        # two sessions of RUNS timed inferences each, the second a fresh process on the unit
        samples = job["latency_ms"]["samples"]
        assert len(samples) == 2 * RUNS and len(set(samples)) > 1 and min(samples) > 0, samples
        assert job["load_ms"] > 0 and job["warm_load_ms"] > 0 and job["first_inference_ms"] > 0
        assert job["provenance"]["latency"] == "measured"
        # the thread count the unit's session ran with, as the script reported it
        assert job["controls"]["threads"].split()[0].isdigit(), job["controls"]
        # the unit's outputs against PyTorch eager on the host, by the usual numeric verdict
        assert job["reference"]["model"]["source"] == "submitted checkpoint"
        assert job["reference"]["passed"] is True, (target, job["reference"])

    executorch = jobs["executorch/xnnpack"]
    assert executorch["runner"].startswith("edge_runner (executorch-python 1.5.1, xnnpack)")
    # the compile report's delegated/fallback counts travel with the device's job
    assert executorch["compile"]["extra"]["delegation"]["aten.mean.dim"] == {"delegated": 0, "fallback": 1}
    # the per-op profile: the unit's ETDump, read on the host with the compile's ETRecord
    assert {op["provider"] for op in executorch["ops"]} >= {"XNNPACK", "portable"}, executorch["ops"]
    assert {op["time_source"] for op in executorch["ops"]} == {"measured"}
    (fallback,) = executorch["fallback_ops"]
    assert fallback["provider"] == "portable" and "mean" in fallback["op_type"]

    litert = jobs["litert/xnnpack"]
    assert litert["runner"].startswith("edge_runner (ai-edge-litert-python 2.3.0, xnnpack)")
    assert litert["compile"]["placement"] == {
        "XNNPACK": sum(litert["compile"]["extra"]["tflite_ops"].values())
    }
    assert litert["ops"] == []
    assert any("LiteRT's Python interpreter exposes no op profiler" in note for note in litert["notes"])

    # what a phone gets: each file in the unit's hash-addressed cache, verified and marked complete
    cache = pixel8_peer.sandbox / "data/local/tmp/farm/cache"
    pushed = {p.name for p in cache.glob("*/*") if (p.parent / "complete").is_file()}
    assert {"model.pte", "model.tflite", "edge_runner.py", "edge_runtimes.py", "inputs.npz"} <= pushed


def test_a_phone_with_the_native_runner_refuses_with_the_recipe(
    pixel8_peer: PeerHandle, tmp_path: Path
) -> None:
    """The shipped pixel8 profile (runner kind `native`) lists executorch/xnnpack: its job is refused
    in one line that names the build recipe, before anything is pushed."""
    settings = AgentSettings(
        profiles=load_profiles(),
        adb_tcp_addresses=(pixel8_peer.address,),
        adb_key_path=pixel8_peer.key_path,
        io_timeout_s=PEER_IO_TIMEOUT_S,
    )
    program = tmp_path / "model.pte"
    program.write_bytes(b"not run")
    request = RunRequest(
        artifact=program,
        artifact_sha256="0" * 64,
        target=Target.parse("executorch/xnnpack"),
        inputs={"x": np.zeros((1, 3), np.float32)},
    )
    with one_unit(settings) as (agent, unit), pytest.raises(UsageError) as refused:
        agent.prepare(unit, request)
    assert "runner kind 'native' runs ONNX models only" in refused.value.message
    assert "\n" not in refused.value.message
    assert "docs/android.md" in refused.value.hint and "executor_runner" in refused.value.hint
    assert not (pixel8_peer.sandbox / "data/local/tmp/farm/cache").exists() or not any(
        (pixel8_peer.sandbox / "data/local/tmp/farm/cache").iterdir()
    )


def test_a_python3_without_the_runtime_fails_in_one_line(pixel8_peer: PeerHandle, tmp_path: Path) -> None:
    """A unit whose python3 lacks the runtime (here the system python3, without numpy or executorch):
    the job fails with the script's own line and the install hint, not a traceback."""
    shipped = load_profiles()
    pixel8 = dataclasses.replace(
        shipped["pixel8"], runner={"kind": "farm-runner", "python": "/usr/bin/python3"}
    )
    settings = AgentSettings(
        profiles={**shipped, "pixel8": pixel8},
        adb_tcp_addresses=(pixel8_peer.address,),
        adb_key_path=pixel8_peer.key_path,
        io_timeout_s=PEER_IO_TIMEOUT_S,
    )
    program = tmp_path / "model.pte"
    program.write_bytes(b"never loaded: the imports fail first")
    request = RunRequest(
        artifact=program,
        artifact_sha256=hashlib.sha256(program.read_bytes()).hexdigest(),
        target=Target.parse("executorch/xnnpack"),
        inputs={"x": np.zeros((1, 3), np.float32)},
    )
    with one_unit(settings) as (agent, unit), pytest.raises(DeviceError) as failed:
        agent.run(unit, request)
    assert "edge_runner: " in failed.value.message and "has no module" in failed.value.message
    assert "\n" not in failed.value.message and "Traceback" not in failed.value.message
    assert failed.value.hint.startswith("pip install executorch for the unit's /usr/bin/python3")
