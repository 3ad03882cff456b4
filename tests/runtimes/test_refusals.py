"""What ExecuTorch and LiteRT targets refuse, in one line each: an op a converter cannot take, a
source that is not a checkpoint, a runtime that is not installed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="PyTorch source tests need torch: pip install 'ondevice-farm[torch]'")

from ..core.conftest import EXAMPLE_MODEL, farm, farm_process


def _save_unsupported(path: Path) -> Path:
    """A module with a determinant: ONNX exports it (Det), but it is no core-ATen op for ExecuTorch
    and litert-torch has no lowering for it."""
    import torch
    from torch import nn

    class Determinant(nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.linalg.det(x @ x.transpose(-1, -2) + torch.eye(4))

    torch.manual_seed(0)
    torch.export.save(torch.export.export(Determinant(), (torch.randn(1, 4, 4),)), str(path))
    return path


@pytest.mark.parametrize("target", ["executorch/xnnpack", "litert/xnnpack"])
def test_a_refused_op_is_one_line_naming_it(tmp_path: Path, target: str) -> None:
    checkpoint = _save_unsupported(tmp_path / "det.pt2")
    done = farm_process(
        tmp_path / "home", "compile", str(checkpoint), "-t", f"{target},ort/cpu", "--json", timeout_s=300
    )
    assert done.returncode == 5, done.stderr  # CompileError; the ONNX route compiled all the same
    assert "Traceback" not in done.stderr
    entries = {entry["target"]: entry for entry in json.loads(done.stdout)["targets"]}
    refusal = entries[target]["error"]
    assert "refused" in refusal and "at aten._linalg_det.default" in refusal, refusal
    assert "\n" not in refusal and entries[target]["hint"]
    assert "report" in entries["ort/cpu"]
    assert "1 of 2 targets failed" in done.stderr


def test_an_onnx_model_cannot_take_a_checkpoint_runtime(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = farm(home, "submit", str(EXAMPLE_MODEL), "-d", "host-cpu", "-t", "ort/cpu,executorch/xnnpack")
    assert done.exit_code == 2
    assert "executorch/xnnpack compiles a PyTorch checkpoint" in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2  # the line and its hint
    assert not (home / "results.sqlite").exists()  # nothing half-written


@pytest.mark.parametrize(
    ("target", "module", "extra"),
    [("executorch/xnnpack", "executorch", "executorch"), ("litert/cpu", "litert_torch", "litert")],
)
def test_a_missing_runtime_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, module: str, extra: str
) -> None:
    from ..torch_source.architectures import save_exported

    checkpoint = save_exported("cnn", tmp_path / "cnn.pt2")
    # import fails as if not installed, also where an earlier test of this process imported it
    for name in [m for m in sys.modules if m == module or m.startswith(f"{module}.")] + [module]:
        monkeypatch.setitem(sys.modules, name, None)
    done = farm(tmp_path / "home", "compile", str(checkpoint), "-t", target, "--json")
    assert done.exit_code == 2
    (entry,) = json.loads(done.stdout)["targets"]
    assert entry["hint"] == f"pip install 'ondevice-farm[{extra}]'"
    assert "\n" not in entry["error"]
