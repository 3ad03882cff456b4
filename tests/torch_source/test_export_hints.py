"""A failed ONNX export says which exporter ran, why the other did not, and what to install or try.

The encoder's `nn.MultiheadAttention`, traced from its ExportedProgram, is what the TorchScript
exporter cannot export (an op of unknown rank); with onnxscript the dynamo exporter takes it.
onnxscript's absence is simulated: `sys.modules["onnxscript"] = None` makes it unfindable and
unimportable for this process, as on an install without the `torch` extra.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "torch", reason="PyTorch source tests need torch: pip install 'ondevice-farm[torch]' (the CPU wheel)"
)

from ondevice_farm.errors import ModelError

from ..core.conftest import farm
from .architectures import build, save_exported


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("farm: error: ") and "Traceback" not in stderr
    return lines[0]


def test_without_onnxscript_the_hint_names_the_torch_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnxscript", None)
    checkpoint = save_exported("encoder", tmp_path / "encoder.pt2")
    result = farm(tmp_path / "home", "compile", str(checkpoint), "--targets", "ort/cpu")
    assert result.exit_code == ModelError.exit_code, result.stderr
    line = _one_error_line(result.stderr)
    assert "the TorchScript exporter failed: " in line
    assert "the dynamo exporter did not run: onnxscript is not installed" in line
    hint = line.partition("(hint: ")[2]
    assert "`torch` extra" in hint and "pip install 'ondevice-farm[torch]'" in hint
    assert "coreml-torch/*" in hint


def test_with_onnxscript_the_same_checkpoint_exports(tmp_path: Path) -> None:
    """The hint is true: what the TorchScript exporter refused, the dynamo exporter takes."""
    pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript (the torch extra)")
    checkpoint = save_exported("encoder", tmp_path / "encoder.pt2")
    result = farm(tmp_path / "home", "compile", str(checkpoint), "--targets", "ort/cpu")
    assert result.exit_code == 0, result.stderr


def test_a_torchscript_checkpoint_is_told_to_become_a_pt2(tmp_path: Path) -> None:
    """A TorchScript `.pt` goes to the TorchScript exporter only: the hint says how the dynamo
    exporter could take the model instead."""
    import torch

    module, example = build("encoder")
    checkpoint = tmp_path / "encoder.pt"
    # the attention's trace differs between invocations: torch's own sanity check refuses it
    torch.jit.trace(module, (example,), check_trace=False).save(str(checkpoint))
    result = farm(
        tmp_path / "home", "compile", str(checkpoint), "--targets", "ort/cpu", "--shape", "x=1x8x32"
    )
    if result.exit_code == 0:
        pytest.skip("this torch's TorchScript exporter exports the traced encoder")
    line = _one_error_line(result.stderr)
    assert "the TorchScript exporter failed: " in line
    assert "not a TorchScript module" in line
    assert "torch.export.save" in line.partition("(hint: ")[2]
