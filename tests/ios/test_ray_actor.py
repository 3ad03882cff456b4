"""An iOS job through a real Ray DeviceActor.

The actor builds its own IosAgent in its own process (over a fake phone at pymobiledevice3's
service boundary, FarmRunner played by the host stand-in, which measures for real) and runs the
job there; a phone unplugged mid-run reaches the controller as a retryable DeviceLostError.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray

from ondevice_farm.controller.ray_errors import is_retryable, to_farm_error
from ondevice_farm.errors import DeviceLostError
from ondevice_farm_agents.base import AgentSettings
from ondevice_farm_agents.ios.agent import DEFAULT_BUNDLE_ID, IosAgent
from ondevice_farm_agents.ios.fakes import FakePhone, FakeProvider
from ondevice_farm_agents.ios.standin_app import StandInRunner, standin_agent
from tests.ios.conftest import IPHONE15, MakeRequest, expected_output, lockdown_values


def agent_with_unplug_at_result_poll(settings: AgentSettings, values: dict[str, Any]) -> IosAgent:
    """A phone whose cable comes out while the host waits for the app's result."""
    phone = FakePhone(values)
    phone.programs[DEFAULT_BUNDLE_ID] = StandInRunner(phone, "normal")
    phone.install(DEFAULT_BUNDLE_ID, "7")
    phone.unplug_when("exists", path_contains="result.json")
    return IosAgent(settings, provider=FakeProvider(phone))


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    # the factory above lives in this test module, which the actor's process cannot import
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    if ray.is_initialized():  # another module's Ray serves as well
        yield
        return
    ray.init(
        address="local",
        include_dashboard=False,
        num_cpus=1,
        object_store_memory=80 * 1024 * 1024,
        log_to_driver=False,
        logging_level="ERROR",
    )
    try:
        yield
    finally:
        ray.shutdown()


def _actor(settings: AgentSettings, factory: Callable[[AgentSettings], IosAgent]) -> Any:
    from ondevice_farm.controller.actor import device_actor_class

    (unit,) = factory(settings).discover()
    return unit, device_actor_class().remote(unit, settings, None, factory)


@pytest.mark.usefixtures("local_ray")
def test_a_job_runs_in_the_device_actor(settings: AgentSettings, make_request: MakeRequest) -> None:
    factory = functools.partial(standin_agent, lockdown_values=lockdown_values(IPHONE15))
    unit, actor = _actor(settings, factory)
    assert unit.profile == "iphone15"
    request = make_request(runs=5)
    done = ray.get(actor.run_job.remote(request), timeout=60)
    assert done.unit == unit
    assert len(done.run.samples_ms) == 5 and all(s > 0 for s in done.run.samples_ms)
    np.testing.assert_allclose(done.run.outputs["y"], expected_output(request.inputs["x"]), rtol=1e-5)
    assert done.run.thermal_before is not None and done.run.thermal_before.status == "nominal"


@pytest.mark.usefixtures("local_ray")
def test_a_phone_unplugged_mid_run_is_a_retryable_device_loss(
    settings: AgentSettings, make_request: MakeRequest, tmp_path: Path
) -> None:
    factory = functools.partial(agent_with_unplug_at_result_poll, values=lockdown_values(IPHONE15))
    _, actor = _actor(settings, factory)
    with pytest.raises(Exception) as caught:  # Ray wraps what the actor raised
        ray.get(actor.run_job.remote(make_request(runs=3)), timeout=60)
    error = to_farm_error(caught.value)
    assert isinstance(error, DeviceLostError), error
    assert is_retryable(error)
