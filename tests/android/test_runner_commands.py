"""What reaches the device's shell: perf_test command lines per target, quoting, confinement."""

from __future__ import annotations

import pytest

from ondevice_farm.errors import DeviceError, UsageError
from ondevice_farm.targets import Target
from ondevice_farm_agents.android.device_paths import DevicePaths
from ondevice_farm_agents.android.perf_test import command_line, provider_options


@pytest.mark.parametrize(
    ("target", "ep"),
    [("ort/nnapi", "nnapi"), ("ort/xnnpack", "xnnpack"), ("ort/qnn", "qnn"), ("ort/cpu", "cpu")],
)
def test_perf_test_command_line_per_target(target: str, ep: str) -> None:
    argv = command_line(
        "/data/local/tmp/farm/bin/onnxruntime_perf_test", "/m/model.onnx", Target.parse(target), 50
    )
    assert argv == [
        "/data/local/tmp/farm/bin/onnxruntime_perf_test",
        "-e",
        ep,
        "-m",
        "times",
        "-r",
        "50",
        "-s",
        "/m/model.onnx",
    ]


def test_perf_test_options_threads_profile_and_fallback_probe() -> None:
    argv = command_line(
        "pt",
        "m.onnx",
        Target.parse("ort/qnn"),
        1,
        options=provider_options("backend_path|libQnnHtp.so"),
        threads=2,
        profile_prefix="/j/profile",
        disable_cpu_fallback=True,
    )
    assert argv[argv.index("-i") + 1] == "backend_path|libQnnHtp.so"
    assert argv[argv.index("-x") + 1] == "2"
    assert argv[argv.index("-p") + 1] == "/j/profile"
    assert argv[argv.index("-C") + 1] == "session.disable_cpu_ep_fallback|1"


def test_perf_test_refuses_coreml_targets_and_shell_characters_in_options() -> None:
    with pytest.raises(UsageError):
        command_line("pt", "m.onnx", Target.parse("coreml/ane"), 1)
    with pytest.raises(UsageError):
        provider_options("backend_path|x;reboot")


@pytest.mark.parametrize("part", ["..", "../etc", "a/b", "x;rm", "$(id)", "", "-rf"])
def test_device_paths_stay_in_the_farm_directory(part: str) -> None:
    with pytest.raises(DeviceError):
        DevicePaths().join(part)


def test_the_device_root_must_be_a_scratch_directory() -> None:
    with pytest.raises(DeviceError):
        DevicePaths("/system/bin")
    assert DevicePaths().job("abc-1") == "/data/local/tmp/farm/jobs/abc-1"
