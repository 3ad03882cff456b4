"""Fixtures for the iOS agent: fake phones from recorded lockdown values, a FarmRunner
package, a small ONNX model, and `ios_agent`, an `IosAgent` wired to a fake phone
(the lead's Ray DeviceActor tests can build on it)."""

from __future__ import annotations

import hashlib
import io
import plistlib
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ondevice_farm.profiles import DeviceProfile, load_profiles
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, RunRequest
from ondevice_farm_agents.ios.agent import DEFAULT_BUNDLE_ID, IosAgent
from ondevice_farm_agents.ios.fakes import FakePhone, FakeProvider, parse_ideviceinfo
from ondevice_farm_agents.ios.standin_app import StandInRunner, standin_agent

MakeAgent = Callable[..., IosAgent]
MakePhone = Callable[..., FakePhone]
MakeRequest = Callable[..., RunRequest]

FIXTURES = Path(__file__).parent / "fixtures"
IPHONE15 = FIXTURES / "ideviceinfo-iphone15_4.txt"
IPHONE13 = FIXTURES / "ideviceinfo-iphone14_5.txt"
#: the weights of the test model: y = softmax(x @ W + B)
W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0 - 0.5
B = np.array([0.1, -2.0, 0.3], dtype=np.float32)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-device", default=False):
        return
    skip = pytest.mark.skip(reason="needs a physical iPhone (run with --run-device; see docs/ios.md)")
    for item in items:
        if "device" in item.keywords and "tests/ios" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def profiles() -> dict[str, DeviceProfile]:
    return load_profiles()


def lockdown_values(path: Path, udid: str | None = None) -> dict[str, object]:
    values = parse_ideviceinfo(path.read_text())
    if udid is not None:
        values["UniqueDeviceID"] = udid
    return values


@pytest.fixture
def make_phone() -> MakePhone:
    """A fake iPhone 15 (or the phone of `fixture`) whose FarmRunner is the host stand-in."""

    def make(
        behaviour: str = "normal", udid: str | None = None, fixture: Path = IPHONE15, installed: bool = True
    ) -> FakePhone:
        phone = FakePhone(lockdown_values(fixture, udid))
        phone.programs[DEFAULT_BUNDLE_ID] = StandInRunner(phone, behaviour)
        if installed:
            phone.install(DEFAULT_BUNDLE_ID, "7")
        return phone

    return make


@pytest.fixture
def runner_package(tmp_path: Path) -> Callable[[str], Path]:
    """A FarmRunner .ipa of a given CFBundleVersion (just Info.plist: the fake phone runs the stand-in)."""

    def build(version: str) -> Path:
        info = {
            "CFBundleIdentifier": DEFAULT_BUNDLE_ID,
            "CFBundleVersion": version,
            "CFBundleExecutable": "FarmRunner",
        }
        path = tmp_path / f"FarmRunner-{version}.ipa"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr(
                "Payload/FarmRunner.app/Info.plist", plistlib.dumps(info, fmt=plistlib.FMT_BINARY)
            )
        return path

    return build


@pytest.fixture
def settings(profiles: dict[str, DeviceProfile], runner_package: Callable[[str], Path]) -> AgentSettings:
    extra = {
        "ios_app_package": str(runner_package("7")),
        "ios_poll_s": "0.01",
        "ios_thermal_deadline_s": "2",
    }
    return AgentSettings(profiles=profiles, io_timeout_s=10.0, extra=extra)


@pytest.fixture
def make_agent(settings: AgentSettings) -> Iterator[MakeAgent]:
    agents: list[IosAgent] = []

    def make(*phones: FakePhone, extra: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> IosAgent:
        chosen = {k: v for k, v in {**settings.extra, **(extra or {})}.items() if k not in drop}
        merged = AgentSettings(profiles=settings.profiles, io_timeout_s=settings.io_timeout_s, extra=chosen)
        agent = IosAgent(merged, provider=FakeProvider(*phones))
        agents.append(agent)
        return agent

    try:
        yield make
    finally:
        for agent in agents:
            agent.close()


@pytest.fixture
def ios_agent(settings: AgentSettings) -> Iterator[IosAgent]:
    """An IosAgent with one fake iPhone 15 attached, FarmRunner installed (the host stand-in).

    Built by `standin_agent`, whose arguments pickle: a Ray DeviceActor can build the same agent.
    """
    agent = standin_agent(settings, lockdown_values(IPHONE15))
    try:
        yield agent
    finally:
        agent.close()


def build_model() -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="matmul"),
        helper.make_node("Add", ["h", "B"], ["z"], name="add_bias"),
        helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=-1),
    ]
    initialisers = [helper.make_tensor("W", TensorProto.FLOAT, [4, 3], W.ravel()),
                    helper.make_tensor("B", TensorProto.FLOAT, [3], B)]  # fmt: skip
    graph = helper.make_graph(nodes, "tiny", [x], [y], initialisers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    buffer = io.BytesIO()
    onnx.save(model, buffer)
    return buffer.getvalue()


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.onnx"
    path.write_bytes(build_model())
    return path


@pytest.fixture
def make_request(model_file: Path) -> MakeRequest:
    def make(
        artifact: Path = model_file, timeout_s: float = 20.0, runs: int = 7, **kwargs: object
    ) -> RunRequest:
        sha = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(artifact.rglob("*")) if p.is_file())
                             if artifact.is_dir() else artifact.read_bytes()).hexdigest()  # fmt: skip
        x = np.array([[1.0, -2.0, 3.0, 0.5]], dtype=np.float32)
        return RunRequest(
            artifact=artifact,
            artifact_sha256=sha,
            target=Target.parse("coreml/ane"),
            inputs={"x": x},
            warmup=2,
            runs=runs,
            timeout_s=timeout_s,
            **kwargs,  # type: ignore[arg-type]
        )

    return make


def expected_output(x: np.ndarray) -> np.ndarray:
    z = x @ W + B
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    softmax: np.ndarray = e / e.sum(axis=-1, keepdims=True)
    return softmax
