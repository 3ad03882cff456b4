"""prepare: FarmRunner installed once, the model and inputs pushed once per content hash."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ondevice_farm.errors import DeviceError
from ondevice_farm_agents.ios.agent import DEFAULT_BUNDLE_ID
from ondevice_farm_agents.ios.fakes import FakePhone

from .conftest import MakeAgent, MakePhone, MakeRequest


def writes(phone: FakePhone, under: str) -> list[str]:
    return [path for op, path in phone.operations if op == "set_file_contents" and path.startswith(under)]


def installs(phone: FakePhone) -> list[str]:
    return [subject for op, subject in phone.operations if op == "install_from_local"]


def test_farmrunner_is_installed_once_then_kept(
    make_agent: MakeAgent,
    make_phone: MakePhone,
    make_request: MakeRequest,
) -> None:
    phone = make_phone(installed=False)
    agent = make_agent(phone)
    (unit,) = agent.discover()

    agent.prepare(unit, make_request())
    agent.prepare(unit, make_request())
    make_agent(phone).prepare(unit, make_request())  # a new agent finds the same version installed

    assert installs(phone) == ["Install:FarmRunner-7.ipa"]
    assert phone.apps[DEFAULT_BUNDLE_ID].version == "7"


def test_a_new_farmrunner_version_is_an_upgrade(
    make_agent: MakeAgent,
    make_phone: MakePhone,
    make_request: MakeRequest,
    runner_package: Callable[[str], Path],
) -> None:
    phone = make_phone()  # version 7 installed
    agent = make_agent(phone, extra={"ios_app_package": str(runner_package("8"))})
    (unit,) = agent.discover()

    agent.prepare(unit, make_request())

    assert installs(phone) == ["Upgrade:FarmRunner-8.ipa"]
    assert phone.apps[DEFAULT_BUNDLE_ID].version == "8"


def test_without_the_app_or_a_package_prepare_says_what_to_do(
    make_agent: MakeAgent,
    make_phone: MakePhone,
    make_request: MakeRequest,
) -> None:
    phone = make_phone(installed=False)
    agent = make_agent(phone, drop=("ios_app_package",))
    (unit,) = agent.discover()

    with pytest.raises(DeviceError, match="not installed") as caught:
        agent.prepare(unit, make_request())
    assert "ios_app_package" in caught.value.hint


def test_the_model_and_inputs_are_pushed_once_per_hash(
    make_agent: MakeAgent,
    make_phone: MakePhone,
    make_request: MakeRequest,
) -> None:
    phone = make_phone()
    agent = make_agent(phone)
    (unit,) = agent.discover()
    request = make_request()

    agent.prepare(unit, request)
    agent.prepare(unit, request)
    make_agent(phone).prepare(unit, request)  # the cache is on the phone, not in the agent

    model_dir = f"Documents/farm/models/{request.artifact_sha256}"
    assert writes(phone, "Documents/farm/models/") == [f"{model_dir}.partial/tiny.onnx"]
    assert len(writes(phone, "Documents/farm/inputs/")) == 1
    files = phone.apps[DEFAULT_BUNDLE_ID].files
    assert files.read(f"{model_dir}/tiny.onnx") == request.artifact.read_bytes()


def test_a_model_directory_is_pushed_with_its_tree(
    make_agent: MakeAgent,
    make_phone: MakePhone,
    make_request: MakeRequest,
    tmp_path: Path,
) -> None:
    package = tmp_path / "tiny.mlpackage"
    (package / "Data" / "com.apple.CoreML" / "weights").mkdir(parents=True)
    (package / "Manifest.json").write_text('{"fileFormatVersion": "1.0.0"}')
    (package / "Data" / "com.apple.CoreML" / "model.mlmodel").write_bytes(b"\x08\x09spec")
    (package / "Data" / "com.apple.CoreML" / "weights" / "weight.bin").write_bytes(bytes(range(256)) * 64)
    phone = make_phone()
    agent = make_agent(phone)
    (unit,) = agent.discover()
    request = make_request(artifact=package)

    agent.prepare(unit, request)

    root = f"Documents/farm/models/{request.artifact_sha256}/tiny.mlpackage"
    files = phone.apps[DEFAULT_BUNDLE_ID].files
    assert files.read(f"{root}/Manifest.json") == b'{"fileFormatVersion": "1.0.0"}'
    assert files.read(f"{root}/Data/com.apple.CoreML/weights/weight.bin") == bytes(range(256)) * 64
    assert files.listdir(f"{root}/Data/com.apple.CoreML") == ["model.mlmodel", "weights"]


def test_an_empty_folder_of_a_model_package_reaches_the_phone(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest, tmp_path: Path
) -> None:
    """An .mlpackage whose weights all fit in its program keeps an empty weights folder that its
    manifest names: without it on the phone, CoreML cannot read the package."""
    package = tmp_path / "model.mlpackage"
    (package / "Data/com.apple.CoreML/weights").mkdir(parents=True)
    (package / "Data/com.apple.CoreML/model.mlmodel").write_bytes(b"program")
    (package / "Manifest.json").write_text("{}")
    phone = make_phone()
    agent = make_agent(phone)
    (unit,) = agent.discover()
    request = make_request(package)

    agent.prepare(unit, request)

    dirs = phone.apps[DEFAULT_BUNDLE_ID].files.dirs
    assert any(
        d.endswith(f"{request.artifact_sha256}/model.mlpackage/Data/com.apple.CoreML/weights") for d in dirs
    )
