"""What a user without torch is told, and the target names of the two CoreML routes (no torch needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ondevice_farm.errors import UsageError
from ondevice_farm.profiles import load_profiles
from ondevice_farm.targets import Target, parse_targets, with_torch_routes
from ondevice_farm.torch_source.runtime import import_torch

from ..core.conftest import farm

PROFILES = Path(__file__).resolve().parents[2] / "device_profiles"


def test_missing_torch_names_the_cpu_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` sees when it is not installed
    with pytest.raises(UsageError) as raised:
        import_torch()
    assert "torch, which is not installed" in raised.value.message
    assert "ondevice-farm[torch]" in raised.value.hint and "whl/cpu" in raised.value.hint


def test_submit_of_a_checkpoint_without_torch_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    checkpoint = tmp_path / "model.pt2"
    checkpoint.write_bytes(b"not read: torch is missing first")
    result = farm(tmp_path / "home", "compile", str(checkpoint), "--targets", "ort/cpu")
    assert result.exit_code == 2
    assert "PyTorch checkpoints need torch" in result.stderr
    assert not (tmp_path / "home" / "torch").exists()


def test_route_targets_parse_and_run_where_their_onnx_twin_does() -> None:
    target = Target.parse("coreml-torch/ane")
    assert (target.runtime, target.backend, target.route, target.name) == (
        "coreml",
        "ane",
        "torch",
        "coreml-torch/ane",
    )
    assert Target.parse("coreml/ane").route == ""
    assert target != Target.parse("coreml/ane")
    profiles = load_profiles(PROFILES)
    iphone = next(p for p in profiles.values() if Target.parse("coreml/ane") in p.targets)
    assert iphone.supports(target)
    assert not profiles["host-cpu"].supports(target)
    twins = with_torch_routes(parse_targets("ort/cpu,coreml/ane") or [])
    assert [t.name for t in twins] == ["ort/cpu", "coreml/ane", "coreml-torch/ane"]


def test_a_torch_route_needs_a_checkpoint(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "tinynet.onnx"
    result = farm(tmp_path / "home", "compile", str(example), "--targets", "coreml-torch/cpu")
    assert result.exit_code == 2
    # every target's failure is reported with the others' results, then one summary line
    assert "converts a PyTorch checkpoint" in result.stdout
    assert "1 of 1 targets failed: coreml-torch/cpu" in result.stderr
