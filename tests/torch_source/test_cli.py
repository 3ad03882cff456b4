"""`farm compile` and `farm submit` of a checkpoint, and `farm report` of the run: the "done when"."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

pytest.importorskip(
    "torch", reason="PyTorch source tests need torch: pip install 'ondevice-farm[torch]' (the CPU wheel)"
)
pytest.importorskip(
    "coremltools", reason="the CoreML routes need coremltools: pip install 'ondevice-farm[coreml]'"
)

from ..core.conftest import farm, farm_json, farm_process
from .architectures import save_exported

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json").read_text()
)


def test_compile_a_checkpoint_for_coreml_builds_both_routes(tmp_path: Path) -> None:
    checkpoint = save_exported("encoder", tmp_path / "encoder.pt2")
    document = farm_json(tmp_path / "home", "compile", str(checkpoint), "--targets", "coreml/ane")
    source = document["model"]["source"]
    assert source["format"] == "exported_program" and len(source["sha256"]) == 64
    assert source["torch_version"].startswith("2.")
    assert [t["target"] for t in document["targets"]] == ["coreml/ane", "coreml-torch/ane"]
    torch_report = document["targets"][1]["report"]
    assert torch_report["extra"]["route"] == "torch"
    assert torch_report["extra"]["frontend"] in ("exported_program", "traced")
    # coremltools names outputs after their last node; the report maps them to the export's names
    assert [o["onnx_name"] for o in torch_report["extra"]["outputs"]] == ["output"]
    routes = document["routes"]["ane"]
    assert routes["onnx"]["mil_ops"] == document["targets"][0]["report"]["nodes_after"]
    assert routes["torch"]["mil_ops"] == torch_report["nodes_after"]
    text = farm(tmp_path / "home", "compile", str(checkpoint), "--targets", "coreml/ane").stdout
    assert "two CoreML routes" in text and "coreml-torch/ane" in text


def test_submit_a_checkpoint_and_report_both_routes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    checkpoint = save_exported("cnn", tmp_path / "cnn.pt2")
    done = farm_process(
        home,
        "submit",
        str(checkpoint),
        "--devices",
        "host-cpu",
        "--targets",
        "ort/cpu",
        "--runs",
        "5",
        "--json",
        timeout_s=240,
    )
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    jsonschema.validate(run, SCHEMA)
    (job,) = run["jobs"]
    assert job["status"] == "ok" and job["reference"]["passed"] is True  # ORT vs eager, not vs itself
    assert job["reference"]["model"]["source"] == "submitted checkpoint"
    assert job["reference"]["model"]["sha256"] == run["model"]["source"]["sha256"]
    source = run["model"]["source"]
    assert source["reference"].startswith("pytorch eager")
    assert source["export_check"]["outputs"]["output"]["snr_db"] > 100
    assert set(source["routes"]["predicted"]) == {"onnx", "torch"}
    page = tmp_path / "report.html"
    report = farm_process(home, "report", run["run_id"], "--html", str(page), timeout_s=240)
    assert report.returncode == 0, report.stderr
    for row in ("ONNX export on ORT CPU", "ONNX route (farm lowering)", "PyTorch route (coremltools"):
        assert row in report.stdout, report.stdout
    assert "(predicted)" in report.stdout and "(measured)" in report.stdout
    html = page.read_text(encoding="utf-8")
    assert 'id="routes"' in html and "PyTorch route (coremltools frontend)" in html


def test_compile_a_torchscript_checkpoint_with_example_inputs(tmp_path: Path) -> None:
    import numpy as np

    from .architectures import save_traced

    checkpoint = tmp_path / "upsampler.pt"
    np.savez(tmp_path / "inputs.npz", x=save_traced("upsampler", checkpoint))
    home = tmp_path / "home"
    refused = farm(home, "compile", str(checkpoint), "--targets", "ort/cpu")
    assert refused.exit_code == 2 and "--example-inputs" in refused.stderr
    document = farm_json(
        home,
        "compile",
        str(checkpoint),
        "--targets",
        "ort/cpu",
        "--example-inputs",
        str(tmp_path / "inputs.npz"),
    )
    assert document["model"]["source"]["format"] == "torchscript"
    assert document["model"]["source"]["onnx_export"]["exporter"] == "torchscript"
    assert [t["target"] for t in document["targets"]] == ["ort/cpu"]
