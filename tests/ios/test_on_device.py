"""On a real iPhone (marked `device`: skipped unless --run-device; docs/ios.md says how to run them).

Needs: an iPhone 15 / 15 Pro on USB, paired and trusted, Developer Mode on, the developer image
mounted, `sudo pymobiledevice3 remote tunneld` running (iOS 17+), FarmRunner installed or
FARM_IOS_APP_PACKAGE naming its .ipa, FARM_IOS_MODEL naming a CoreML model (.mlpackage)
and FARM_IOS_INPUTS its float32 input shapes (`name:1x3x224x224;other:1x8`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, DeviceUnit, RunRequest
from ondevice_farm_agents.ios.agent import IosAgent

pytestmark = pytest.mark.device


@pytest.fixture
def real_agent(profiles: dict[str, DeviceProfile]) -> Iterator[IosAgent]:
    extra = {"ios_thermal_deadline_s": "120"}
    if os.environ.get("FARM_IOS_APP_PACKAGE"):
        extra["ios_app_package"] = os.environ["FARM_IOS_APP_PACKAGE"]
    agent = IosAgent(AgentSettings(profiles=profiles, extra=extra))
    try:
        yield agent
    finally:
        agent.close()


@pytest.fixture
def unit(real_agent: IosAgent) -> DeviceUnit:
    units = real_agent.discover()
    if not units:
        pytest.fail("no iPhone of a known profile is attached")
    return units[0]


def test_the_attached_iphone_is_recognised(real_agent: IosAgent, unit: DeviceUnit) -> None:
    assert unit.profile in ("iphone15", "iphone15-pro")
    assert unit.properties["ProductType"].startswith("iPhone")
    assert real_agent.health(unit).up


@pytest.mark.parametrize("target", ["coreml/ane", "coreml/gpu", "coreml/cpu"])
def test_a_coreml_model_runs_with_placement(real_agent: IosAgent, unit: DeviceUnit, target: str) -> None:
    model = Path(os.environ["FARM_IOS_MODEL"])
    sha = hashlib.sha256()
    for path in sorted(p for p in model.rglob("*") if p.is_file()) if model.is_dir() else [model]:
        sha.update(path.read_bytes())
    # FARM_IOS_INPUTS: name:1x3x224x224;other:1x8 (float32 each)
    shapes = dict(item.split(":") for item in os.environ["FARM_IOS_INPUTS"].split(";"))
    rng = np.random.default_rng(0)
    inputs = {
        name: rng.random([int(d) for d in dims.split("x")], dtype=np.float32) for name, dims in shapes.items()
    }
    request = RunRequest(
        model, sha.hexdigest(), Target.parse(target), inputs, warmup=3, runs=10, timeout_s=300
    )

    real_agent.prepare(unit, request)
    run = real_agent.run(unit, request)

    assert len(run.samples_ms) == 10 and run.load_ms > 0
    assert run.outputs and all(np.isfinite(a).all() for a in run.outputs.values())
    assert run.thermal_before is not None
    if target == "coreml/cpu" and run.placement:
        assert set(run.placement.values()) == {"CPU"}
