"""`farm submit` of a checkpoint on host-cpu with ORT, ExecuTorch and LiteRT: measured for real,
each against PyTorch eager, and one report with every target side by side."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest

pytest.importorskip("torch", reason="PyTorch source tests need torch: pip install 'ondevice-farm[torch]'")

from ..core.conftest import farm_process
from ..torch_source.architectures import save_exported

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json").read_text()
)
TARGETS = "ort/cpu,executorch/xnnpack,litert/xnnpack"


@pytest.fixture(scope="module")
def submitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("submit")
    checkpoint = save_exported("cnn", root / "cnn.pt2")
    home = root / "home"
    done = farm_process(
        home,
        "submit",
        str(checkpoint),
        "-d",
        "host-cpu",
        "-t",
        TARGETS,
        "--runs",
        "8",
        "--repeats",
        "2",
        "--json",
        timeout_s=600,
    )
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    jsonschema.validate(run, SCHEMA)
    return home, run


def _jobs(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {job["target"]: job for job in run["jobs"]}


def test_every_runtime_is_measured_against_eager(submitted: tuple[Path, dict[str, Any]]) -> None:
    _, run = submitted
    jobs = _jobs(run)
    assert set(jobs) == set(TARGETS.split(","))
    for target, job in jobs.items():
        assert job["status"] == "ok", (target, job.get("error"))
        assert job["reference"]["model"]["source"] == "submitted checkpoint"
        assert job["reference"]["passed"] is True, (target, job["reference"])
        assert job["reference"]["outputs"]["output"]["snr_db"] > 80
        latency = job["latency_ms"]
        # two sessions of 8 timed runs each: the second in a fresh process
        assert len(latency["samples"]) == 16, target
        assert 0 < latency["p50"] <= latency["p90"] <= latency["max"]
        assert job["load_ms"] > 0 and job["warm_load_ms"] > 0 and job["first_inference_ms"] > 0
        assert job["provenance"]["latency"] == "measured"


def test_executorch_profiles_delegate_and_portable_kernels(submitted: tuple[Path, dict[str, Any]]) -> None:
    _, run = submitted
    job = _jobs(run)["executorch/xnnpack"]
    assert job["runner"].startswith("executorch-python 1.5.1")
    providers = {op["provider"] for op in job["ops"]}
    assert {"XNNPACK", "portable"} <= providers, job["ops"]
    assert {op["time_source"] for op in job["ops"]} == {"measured"}
    # the mean the XNNPACK partitioner left out is the job's fallback, with its measured time
    (fallback,) = job["fallback_ops"]
    assert fallback["provider"] == "portable" and "mean" in fallback["op_type"]
    assert job["compile"]["extra"]["delegation"]["aten.mean.dim"] == {"delegated": 0, "fallback": 1}


def test_litert_says_it_has_no_per_op_profile(submitted: tuple[Path, dict[str, Any]]) -> None:
    _, run = submitted
    job = _jobs(run)["litert/xnnpack"]
    assert job["runner"].startswith("ai-edge-litert-python 2.3.0")
    assert job["ops"] == []
    assert any("LiteRT's Python interpreter exposes no op profiler" in note for note in job["notes"])
    # XNNPACK took the flatbuffer's every node: one delegate kernel is all the interpreter calls
    assert job["compile"]["placement"] == {"XNNPACK": sum(job["compile"]["extra"]["tflite_ops"].values())}
    assert job["compile"]["op_types_after"] == {"DELEGATE": 1}


def test_the_report_sets_all_targets_side_by_side(
    submitted: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    home, run = submitted
    page = tmp_path / "report.html"
    wide = dict(os.environ, COLUMNS="250")  # the table's labels on one line each
    done = farm_process(home, "report", run["run_id"], "--html", str(page), env=wide, timeout_s=240)
    assert done.returncode == 0, done.stderr
    for target in TARGETS.split(","):
        assert f"host-cpu {target}" in done.stdout
    assert "delegated / fallback nodes" in done.stdout
    assert "left aten.mean.dim (1) on portable kernels" in done.stdout  # the delegation finding
    html = page.read_text(encoding="utf-8")
    assert all(f"host-cpu {target}" in html for target in TARGETS.split(","))
    assert "delegated / fallback nodes" in html
