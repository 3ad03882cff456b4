"""`farm submit --devices linux-adb`: the whole farm over the real ADB wire protocol.

The CLI, the embedded Ray and its DeviceActor, the AndroidAgent with the real adb-shell client,
the ADB peer on loopback, and the farm's runner running ONNX Runtime in the peer's sandbox:
real measurements and outputs come back and are checked against the host reference.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
from click.testing import CliRunner

from ondevice_farm.cli.main import cli
from tests.android.peer_fixtures import PeerHandle

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "farm/ondevice_farm/schema/run.schema.json").read_text())


def test_submit_runs_on_a_linux_board_over_adb(adb_peer: PeerHandle, tmp_path: Path) -> None:
    model = tmp_path / "tinynet.onnx"
    shutil.copy(REPO / "examples/tinynet.onnx", model)
    result = CliRunner().invoke(
        cli,
        [
            "--home",
            str(tmp_path / "home"),
            "submit",
            str(model),
            "--devices",
            "linux-adb",
            "--adb",
            adb_peer.address,
            "--runs",
            "10",
            "--warmup",
            "2",
            "--json",
        ],
        env={"FARM_ADB_KEY": str(adb_peer.key_path)},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    (job,) = document["jobs"]
    assert (job["device"], job["target"], job["status"]) == ("linux-adb", "ort/cpu", "ok")
    assert job["unit"] == f"tcp:{adb_peer.address}"
    assert len(job["latency_ms"]["samples"]) == 10
    assert job["runner"].startswith("farm_runner (onnxruntime-python")
    # the board ran the same model on the same inputs: its outputs match the host reference
    assert job["reference"]["passed"] is True
    assert job["ops"] and {op["provider"] for op in job["ops"]} == {"CPUExecutionProvider"}
    # the artifact sits in the board's hash-addressed cache, verified and marked complete
    cached = list((adb_peer.sandbox / "data/local/tmp/farm/cache").glob(f"{job['artifact_sha256']}*"))
    assert cached, "the artifact was not pushed into the device cache"


def test_a_board_dropping_mid_push_loses_no_job(adb_peer: PeerHandle, adb_key: Path, tmp_path: Path) -> None:
    """Two boards, one drops the link mid-push: its job is retried on the other, both land whole."""
    from tests.android.adb_peer.faults import Fault
    from tests.android.peer_fixtures import start_peer

    second = start_peer(tmp_path / "second-board", adb_key)
    try:
        adb_peer.peer.inject(Fault("drop", "push", match="model.onnx", after_bytes=1000))
        model = tmp_path / "tinynet.onnx"
        shutil.copy(REPO / "examples/tinynet.onnx", model)
        home = tmp_path / "home"
        result = CliRunner().invoke(
            cli,
            [
                "--home",
                str(home),
                "submit",
                str(model),
                "--devices",
                "linux-adb,linux-adb",
                "--adb",
                adb_peer.address,
                "--adb",
                f"{second.host}:{second.port}",
                "--runs",
                "5",
                "--warmup",
                "1",
                "--json",
            ],
            env={"FARM_ADB_KEY": str(adb_key)},
            catch_exceptions=False,
        )
    finally:
        second.stop()
    assert result.exit_code == 0, result.stderr
    jobs = json.loads(result.stdout)["jobs"]
    assert len(jobs) == 2 and all(j["status"] == "ok" and j["reference"]["passed"] for j in jobs)
    retried = [j for j in jobs if len(j["attempts"]) > 1]
    assert len(retried) == 1, [j["attempts"] for j in jobs]
    first, last = retried[0]["attempts"][0], retried[0]["attempts"][-1]
    assert first["unit"].endswith(adb_peer.address) and "lost" in (first["error"] or "").lower()
    assert not last["unit"].endswith(adb_peer.address) and retried[0]["unit"] == last["unit"].split(":", 1)[1]
    # the dropped push left only a partial file on the faulty board, never a complete entry
    entry = adb_peer.sandbox / "data/local/tmp/farm/cache" / jobs[0]["artifact_sha256"]
    assert not (entry / "complete").exists() and not (entry / "model.onnx").exists()
