"""A checkpoint torch.onnx.export refuses still reaches the runtimes that convert the checkpoint
itself: ExecuTorch compiles and runs it against eager, while every target built from the ONNX
export fails in one line with the export's reason, and a submission of those alone fails whole.

The op: `torch.nn.functional.pdist` (`aten._pdist_forward`, core ATen). torch 2.13's dynamo
exporter has no ONNX function for it, its TorchScript exporter no symbolic; ExecuTorch has a
portable kernel. litert-torch 0.10 refuses it too (a `select_v2` it cannot legalise): one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

pytest.importorskip("torch", reason="PyTorch source tests need torch: pip install 'ondevice-farm[torch]'")
pytest.importorskip("executorch", reason="ExecuTorch targets need: pip install 'ondevice-farm[executorch]'")

from ..core.conftest import farm

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json").read_text()
)
TARGETS = "ort/cpu,executorch/portable,litert/cpu"


def _save_pdist(path: Path) -> Path:
    """Pairwise distances of four projected rows: six values, no ONNX export of the op."""
    import torch
    from torch import nn

    class PairwiseDistances(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(8, 8)

        def forward(self, x: Any) -> Any:
            return nn.functional.pdist(self.proj(x))

    torch.manual_seed(0)
    torch.export.save(torch.export.export(PairwiseDistances().eval(), (torch.randn(4, 8),)), str(path))
    return path


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _save_pdist(tmp_path_factory.mktemp("pdist") / "pdist.pt2")


def _one_line_naming_pdist(error: str) -> None:
    assert error.startswith("the ONNX export refused: "), error
    assert "aten::pdist" in error or "aten._pdist_forward" in error, error
    assert "\n" not in error and "Traceback" not in error


def test_submit_runs_what_needs_no_onnx(
    checkpoint: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    done = farm(
        tmp_path / "home",
        *("submit", str(checkpoint), "-d", "host-cpu", "-t", TARGETS),
        *("--runs", "5", "--warmup", "1", "--repeats", "1", "--no-profile", "--json"),
    )
    assert done.exit_code == 1, done.stderr  # some targets failed, not the submission
    # the TorchScript exporter prints the graph it failed on from C++, past Python's streams
    assert "Torch IR graph" not in capfd.readouterr().out
    run = json.loads(done.stdout)
    jsonschema.validate(run, SCHEMA)
    model = run["model"]
    assert model["opset"] is None and model["nodes"] is None
    assert model["sha256"] == model["source"]["sha256"]  # the checkpoint: no ONNX file exists
    refused = model["source"]["onnx_export"]
    assert "pdist" in refused["refused"] and refused["op"] in ("aten.pdist", "aten._pdist_forward")
    jobs = {job["target"]: job for job in run["jobs"]}
    assert set(jobs) == set(TARGETS.split(","))
    assert jobs["ort/cpu"]["status"] == "failed"
    _one_line_naming_pdist(jobs["ort/cpu"]["error"])
    executorch = jobs["executorch/portable"]
    assert executorch["status"] == "ok", executorch.get("error")
    assert executorch["reference"]["model"]["source"] == "submitted checkpoint"
    assert executorch["reference"]["passed"] is True, executorch["reference"]
    assert executorch["reference"]["outputs"]["output"]["snr_db"] > 80
    assert executorch["latency_ms"]["p50"] > 0
    litert = jobs["litert/cpu"]
    if litert["status"] == "failed":  # litert-torch 0.10 refuses the lowered pdist
        assert "litert-torch refused" in litert["error"] and "\n" not in litert["error"]
    else:
        assert litert["reference"]["passed"] is True, litert["reference"]
    # the report has no ONNX graph to align or pre-flight, and says why
    page = tmp_path / "report.html"
    report = farm(tmp_path / "home", "report", run["run_id"], "--html", str(page))
    assert report.exit_code == 0, report.stderr
    # the terminal wraps lines at its width (80 columns where none is known)
    assert "no ONNX: torch.onnx.export refused it" in " ".join(report.stdout.split())
    assert "no ONNX: torch.onnx.export refused it" in page.read_text(encoding="utf-8")


def test_compile_reports_every_target(checkpoint: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    only = farm(home, "compile", str(checkpoint), "-t", "executorch/portable", "--json")
    assert only.exit_code == 0, only.stderr  # asked only for what needs no ONNX
    (entry,) = json.loads(only.stdout)["targets"]
    assert "report" in entry
    mixed = farm(home, "compile", str(checkpoint), "-t", "ort/cpu,executorch/portable", "--json")
    assert mixed.exit_code == 5, mixed.stderr  # a CompileError, like any target that failed
    entries = {e["target"]: e for e in json.loads(mixed.stdout)["targets"]}
    _one_line_naming_pdist(entries["ort/cpu"]["error"])
    assert "executorch/*" in entries["ort/cpu"]["hint"]
    assert "report" in entries["executorch/portable"]


def test_nothing_runs_without_onnx_fails_whole(checkpoint: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = farm(home, "submit", str(checkpoint), "-d", "host-cpu", "-t", "ort/cpu")
    assert done.exit_code == 3, done.stderr  # the export's ModelError, as it always was
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "torch.onnx.export cannot export it" in lines[0], done.stderr
    assert not (home / "results.sqlite").exists()  # nothing half-written
    assert not (home / "artifacts").exists()
