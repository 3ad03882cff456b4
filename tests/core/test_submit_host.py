"""`farm submit` on the host, for real: embedded Ray, ONNX Runtime, the store, the JSON contract."""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from .conftest import farm, farm_json, farm_process
from .pinned_model import X, sample_rate_branch

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json").read_text()
)
#: a process may reset its RSS high-water mark and read it back (agents/ondevice_farm_agents/host/memory.py)
LINUX_PEAK_RSS = os.access("/proc/self/clear_refs", os.W_OK) and Path("/proc/self/status").is_file()


def _processes_with_marker(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if marker.encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_submit_as_a_user_would(home: Path, model: Path) -> None:
    """The real entry point in its own process: report, valid JSON, the run stored, no processes left."""
    marker = f"FARM_TEST_MARKER={uuid.uuid4().hex}"
    env = dict(os.environ, FARM_TEST_MARKER=marker.split("=", 1)[1])
    done = farm_process(
        home, "submit", str(model), "--devices", "host-cpu", "--runs", "20", "--json", env=env
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # stdout holds one JSON document and nothing else
    jsonschema.validate(document, SCHEMA)
    assert "running 1 job(s)" in done.stderr  # progress goes to stderr
    assert _processes_with_marker(marker.split("=", 1)[1]) == []  # Ray's processes are gone

    (job,) = document["jobs"]
    assert (job["device"], job["target"], job["status"]) == ("host-cpu", "ort/cpu", "ok")
    latency = job["latency_ms"]
    assert len(latency["samples"]) == 20
    # the headline figures are the samples' own (numpy's linear percentiles, computed here)
    samples = np.asarray(latency["samples"], dtype=np.float64)
    assert (latency["min"], latency["max"]) == (pytest.approx(samples.min()), pytest.approx(samples.max()))
    for point in (50, 90, 99):
        assert latency[f"p{point}"] == pytest.approx(float(np.percentile(samples, point)), rel=1e-6)
    assert job["first_inference_ms"] > 0 and job["load_ms"] > 0
    # the session's peak RSS above its start (VmHWM, reset through clear_refs): where Linux gives it,
    # it must be there, and a session's load takes memory
    if LINUX_PEAK_RSS:
        assert job["peak_memory_mb"] is not None and job["peak_memory_mb"] > 0, job["peak_memory_mb"]
    else:
        assert job["peak_memory_mb"] is None
    # the same seeded inputs on the same runtime: outputs agree with the reference to fp32 rounding
    assert job["reference"]["passed"] is True
    assert job["reference"]["outputs"]["probabilities"]["snr_db"] > 80
    # ORT folds BatchNormalization into Conv and fuses Clip: the report says so
    fusions = {f["op_type"]: f for f in job["compile"]["fusions"]}
    assert fusions["BatchNormalization"]["after"] == 0
    assert job["compile"]["nodes_after"] < job["compile"]["nodes_before"] == 61
    assert job["compile"]["placement"] == {"CPUExecutionProvider": job["compile"]["nodes_before"] - 20}
    assert job["compile"]["partitions"] == 1
    assert job["ops"] and all(op["provider"] == "CPUExecutionProvider" for op in job["ops"])
    assert abs(sum(op["share"] for op in job["ops"]) - 1.0) < 1e-3
    assert job["fallback_ops"] == []  # the CPU is not an accelerator: nothing "falls back"

    shown = farm_json(home, "show", document["run_id"][:15])
    assert shown["run_id"] == document["run_id"] and shown["status"] == "complete"
    jsonschema.validate(shown, SCHEMA)
    assert shown["jobs"][0]["latency_ms"] == latency
    listed = farm_json(home, "runs")
    assert [r["run_id"] for r in listed["runs"]] == [document["run_id"]]
    assert listed["runs"][0]["jobs"] == {"ok": 1}


@pytest.mark.usefixtures("ray_session")
def test_terminal_report_explains_the_job(home: Path, model: Path) -> None:
    result = farm(home, "submit", str(model), "--runs", "5", "--warmup", "1")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for needle in ("host-cpu", "ort/cpu", "p50 ms", "pass", "BatchNormalization 20->0", "Slowest ops"):
        assert needle in out


@pytest.mark.usefixtures("ray_session")
def test_inputs_from_npz_reach_the_device(home: Path, model: Path, tmp_path: Path) -> None:
    """A user's own inputs replace the seeded ones; the reference is computed on the same."""
    npz = tmp_path / "cat.npz"
    np.savez(npz, image=np.full((1, 3, 96, 96), 0.5, dtype=np.float32))
    seeded = farm_json(home, "submit", str(model), "--runs", "3")
    given = farm_json(home, "submit", str(model), "--runs", "3", "--inputs", str(npz))
    assert given["jobs"][0]["reference"]["passed"]
    assert given["model"]["inputs"] == seeded["model"]["inputs"]
    # different inputs, different reference: the two runs' stored references differ
    refs = sorted((home / "references").glob("*.npz"))
    assert len(refs) == 2


@pytest.mark.usefixtures("ray_session")
def test_dynamic_batch_from_shape(home: Path, model: Path) -> None:
    document = farm_json(home, "submit", str(model), "--runs", "3", "--shape", "image=4x3x96x96")
    assert document["model"]["inputs"] == [{"name": "image", "shape": [4, 3, 96, 96], "dtype": "float32"}]
    assert document["jobs"][0]["status"] == "ok"


@pytest.mark.usefixtures("ray_session")
def test_failed_job_records_its_error_and_nothing_else(home: Path, model: Path, tmp_path: Path) -> None:
    """A target this host's onnxruntime lacks fails that job; the other job still lands."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "host-cpu.yaml").write_text(
        "name: host-cpu\nplatform: host\ntargets: [ort/cpu, ort/xnnpack]\nrecognise: {device: cpu}\n"
    )
    result = farm(home, "submit", str(model), "--runs", "3", "--json", profiles_dir=profiles)
    assert result.exit_code == 1
    document: dict[str, Any] = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    by_target = {j["target"]: j for j in document["jobs"]}
    assert by_target["ort/cpu"]["status"] == "ok"
    failed = by_target["ort/xnnpack"]
    assert failed["status"] == "failed" and "XnnpackExecutionProvider" in failed["error"]
    assert "latency_ms" not in failed and "ops" not in failed
    with sqlite3.connect(home / "results.sqlite") as db:
        rows = db.execute("SELECT target, status, error FROM jobs ORDER BY target").fetchall()
        (status,) = db.execute("SELECT status FROM runs").fetchone()
    assert [(r[0], r[1]) for r in rows] == [("ort/cpu", "ok"), ("ort/xnnpack", "failed")]
    assert status == "partial"


def test_no_unit_attached_is_a_clear_error(home: Path, model: Path) -> None:
    done = farm_process(home, "submit", str(model), "--devices", "host-cpu:no-such-unit")
    assert done.returncode == 7, done.stderr
    assert "no unit of host-cpu:no-such-unit is attached" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (home / "results.sqlite").exists()


def _stored_reference(home: Path) -> np.ndarray:
    (path,) = (home / "references").glob("*.npz")
    with np.load(path) as archive:
        return np.asarray(archive["y"])


@pytest.mark.usefixtures("ray_session")
def test_fix_pins_the_input_of_the_reference_and_the_job(tmp_path: Path) -> None:
    """`--fix sr=16000` on a model that branches on sr: the reference takes the 16 kHz branch
    (x * 2) and the ORT job, checked against it, does too (the seeded sr would take x * 3, and
    fail the check); the run records the pin. (`--fix sr` from --inputs: test_submit_fix.py.)"""
    model = sample_rate_branch(tmp_path / "vad_like.onnx")
    npz = tmp_path / "x.npz"
    np.savez(npz, x=X)
    base = ["submit", str(model), "-t", "ort/cpu", "--runs", "2", "--warmup", "0", "--no-profile"]
    home = tmp_path / "home"

    document = farm_json(home, *base, "--inputs", str(npz), "--fix", "sr=16000")

    jsonschema.validate(document, SCHEMA)
    (job,) = document["jobs"]
    assert job["status"] == "ok" and job["reference"]["passed"] is True, job
    assert document["settings"]["fixed_inputs"] == {"sr": 16000}
    np.testing.assert_array_equal(_stored_reference(home), X * 2)

    # the terminal report says it once, above the table
    shown = farm(home, "show", document["run_id"])
    assert shown.exit_code == 0, shown.output
    assert "inputs pinned (--fix): sr=16000" in shown.output
