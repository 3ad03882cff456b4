"""The profile of simulated units: added to the loaded profiles only when simulation is asked for."""

from __future__ import annotations

from agents.simulated.agent import PLATFORM, PROFILE
from farm.profiles import DeviceProfile
from farm.targets import Target


def simulated_profile() -> DeviceProfile:
    return DeviceProfile(
        name=PROFILE,
        display_name="Simulated unit (scheduler load tests only)",
        platform=PLATFORM,
        targets=(Target.parse("ort/cpu"),),
    )


def with_simulated(profiles: dict[str, DeviceProfile]) -> dict[str, DeviceProfile]:
    return {**profiles, PROFILE: simulated_profile()}
