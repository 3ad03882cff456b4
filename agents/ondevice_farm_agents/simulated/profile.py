"""The profile of simulated units: added to the loaded profiles only when simulation is asked for."""

from __future__ import annotations

from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.targets import Target
from ondevice_farm_agents.simulated.agent import PLATFORM, PROFILE


def simulated_profile() -> DeviceProfile:
    return DeviceProfile(
        name=PROFILE,
        display_name="Simulated unit (scheduler load tests only)",
        platform=PLATFORM,
        targets=(Target.parse("ort/cpu"),),
    )


def with_simulated(profiles: dict[str, DeviceProfile]) -> dict[str, DeviceProfile]:
    return {**profiles, PROFILE: simulated_profile()}
