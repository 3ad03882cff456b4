"""`on_request` targets: a device runs them when `-t` names them, never by default, so a plain
submit of a checkpoint to a phone plans no ExecuTorch/LiteRT job its stock runner would refuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from ondevice_farm.controller.selection import DeviceSelector, check_targets, targets_for
from ondevice_farm.errors import ProfileError, UsageError
from ondevice_farm.profiles import load_profiles, parse_profile
from ondevice_farm.targets import Target

ROOT = Path(__file__).resolve().parents[2]
EDGE = [Target.parse("executorch/xnnpack"), Target.parse("litert/xnnpack")]


def test_a_phone_runs_edge_runtimes_only_when_asked() -> None:
    pixel8 = load_profiles(ROOT / "device_profiles")["pixel8"]
    assert not set(EDGE) & set(targets_for(pixel8, None))
    assert Target.parse("ort/nnapi") in targets_for(pixel8, None)
    assert targets_for(pixel8, EDGE) == EDGE
    check_targets([DeviceSelector("pixel8")], {"pixel8": pixel8}, EDGE)  # asked for: accepted


def test_a_target_no_device_has_lists_the_on_request_ones_too() -> None:
    profiles = load_profiles(ROOT / "device_profiles")
    with pytest.raises(UsageError, match=r"they support: .*executorch/xnnpack") as caught:
        check_targets([DeviceSelector("pixel8")], profiles, [Target.parse("coreml/ane")])
    assert "litert/xnnpack" in str(caught.value)


def test_a_linux_board_set_up_for_them_runs_them_by_default() -> None:
    board = load_profiles(ROOT / "device_profiles")["linux-adb"]
    assert set(EDGE) <= set(targets_for(board, None))


BASE = {"name": "p", "platform": "android", "targets": ["ort/cpu"]}


def test_a_target_in_both_lists_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="ort/cpu is in both 'targets' and 'on_request'"):
        parse_profile({**BASE, "on_request": ["ort/cpu"]}, tmp_path / "p.yaml")


def test_an_unknown_on_request_target_names_the_field(tmp_path: Path) -> None:
    # a runtime the farm does not have (tvm/cpu was the example until TVM became one)
    with pytest.raises(ProfileError, match="field 'on_request' has unknown target 'xla/cpu'"):
        parse_profile({**BASE, "on_request": ["xla/cpu"]}, tmp_path / "p.yaml")
