"""The profile of simulated units: added to the loaded profiles only when simulation is asked for."""

from __future__ import annotations

from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.targets import Target
from ondevice_farm_agents.simulated.agent import PLATFORM, PROFILE


def simulated_profile() -> DeviceProfile:
    # accelerator targets on request only: `--devices simulated` alone stays one job per model, and
    # a lab suite that names them gets jobs with CPU fallbacks in their op tables
    return DeviceProfile(
        name=PROFILE,
        display_name="Simulated unit (load tests and simulated labs; synthetic figures)",
        platform=PLATFORM,
        targets=(Target.parse("ort/cpu"),),
        on_request=(Target.parse("ort/xnnpack"), Target.parse("ort/nnapi")),
    )


def is_simulated(profile: DeviceProfile) -> bool:
    return profile.platform == PLATFORM


def with_simulated(profiles: dict[str, DeviceProfile]) -> dict[str, DeviceProfile]:
    return {**profiles, PROFILE: simulated_profile()}
