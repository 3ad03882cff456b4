"""Phone profiles: which runner they use, and which Galaxy S24 is which."""

from __future__ import annotations

from pathlib import Path

import pytest

from ondevice_farm.errors import ProfileError
from ondevice_farm.profiles import load_profiles, match_profile, parse_profile
from ondevice_farm.targets import Target
from ondevice_farm_agents.android.agent import NATIVE, AndroidAgent
from ondevice_farm_agents.android.native_runner import NativeCommand, ep_options
from ondevice_farm_agents.android.perf_test import perf_test_options


def test_phone_profiles_use_the_native_runner() -> None:
    profiles = load_profiles()
    for name in ("pixel8", "galaxy-s24", "galaxy-s24-exynos"):
        assert AndroidAgent._runner_kind(profiles[name]) == NATIVE


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("SM-S921U", "galaxy-s24"),
        ("SM-S921U1", "galaxy-s24"),
        ("SM-S921W", "galaxy-s24"),
        ("SM-S921Q", "galaxy-s24"),
        ("SM-S9210", "galaxy-s24"),
        ("SM-S921B", "galaxy-s24-exynos"),
        ("SM-S921N", "galaxy-s24-exynos"),
        ("SM-S928U", None),
    ],
)
def test_snapdragon_galaxy_s24s_get_qnn_and_exynos_ones_do_not(model: str, profile: str | None) -> None:
    profiles = load_profiles()
    found = match_profile({"ro.product.model": model}, profiles, "android")
    assert (found.name if found else None) == profile
    if found:
        assert (Target.parse("ort/qnn") in found.targets) == (profile == "galaxy-s24")


def test_a_recognise_value_must_be_a_value_or_a_list_of_values(tmp_path: Path) -> None:
    data = {"name": "x", "platform": "android", "targets": ["ort/cpu"], "recognise": {"m": [{"a": 1}]}}
    with pytest.raises(ProfileError, match=r"recognise\.m must be a value or a list"):
        parse_profile(data, tmp_path / "x.yaml")


def test_the_native_command_sets_the_library_paths_and_quotes_everything() -> None:
    cache = "/data/local/tmp/farm/cache"
    command = NativeCommand(
        f"{cache}/ab/farm_native_runner", f"{cache}/cd", qnn_lib_dir="/data/local/tmp/farm/qnn"
    )
    line = command.line(["--input", "input ids=/x.npy", "--ep", "qnn"])
    assert line == (
        "LD_LIBRARY_PATH=/data/local/tmp/farm/cache/cd:/data/local/tmp/farm/qnn "
        "ADSP_LIBRARY_PATH=/data/local/tmp/farm/qnn /data/local/tmp/farm/cache/ab/farm_native_runner "
        "--input 'input ids=/x.npy' --ep qnn"
    )
    assert ep_options(["backend_path|/q/libQnnHtp.so", "NNAPI_FLAG_USE_FP16|1"]) == [
        "backend_path=/q/libQnnHtp.so",
        "NNAPI_FLAG_USE_FP16=1",
    ]


def test_nnapi_flags_are_bare_words_for_perf_test() -> None:
    flags = ["NNAPI_FLAG_USE_FP16|1", "NNAPI_FLAG_CPU_DISABLED|0", "NNAPI_FLAG_USE_NCHW|1"]
    assert perf_test_options("nnapi", flags) == ["NNAPI_FLAG_USE_FP16", "NNAPI_FLAG_USE_NCHW"]
    assert perf_test_options("qnn", ["backend_path|libQnnHtp.so"]) == ["backend_path|libQnnHtp.so"]
