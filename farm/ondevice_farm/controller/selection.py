"""Which units and targets a submission asks for: `--devices` and `--targets`."""

from __future__ import annotations

from dataclasses import dataclass

from ondevice_farm.errors import UsageError
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.targets import Target
from ondevice_farm.targets_on_host import host_commands
from ondevice_farm_agents.base import DeviceUnit


@dataclass(frozen=True)
class DeviceSelector:
    """`pixel8` (any unit of the profile) or `pixel8:SERIAL` (that unit)."""

    profile: str
    serial: str | None = None

    def __str__(self) -> str:
        return self.profile if self.serial is None else f"{self.profile}:{self.serial}"

    def matches(self, unit: DeviceUnit) -> bool:
        return unit.profile == self.profile and self.serial in (None, unit.serial)


def parse_devices(
    text: str, profiles: dict[str, DeviceProfile], attached: set[str] | None = None
) -> list[DeviceSelector]:
    """`host-cpu,pixel8:ABC` -> selectors; `all` -> every profile with a unit attached."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise UsageError("--devices is empty; name at least one device profile (see `farm devices`)")
    if parts == ["all"]:
        names = sorted(attached or set())
        if not names:
            raise UsageError("--devices all: no units are attached", hint="`farm devices` lists them")
        return [DeviceSelector(name) for name in names]
    selectors = []
    for part in parts:
        profile, _, serial = part.partition(":")
        if profile not in profiles:
            raise UsageError(f"unknown device {profile!r}; known profiles: {', '.join(sorted(profiles))}")
        selectors.append(DeviceSelector(profile, serial or None))
    return selectors


def targets_for(profile: DeviceProfile, wanted: list[Target] | None) -> list[Target]:
    """The targets asked for that `profile` runs; none asked for: its own list (not `on_request`)."""
    if wanted is None:
        return list(profile.targets)
    return [t for t in wanted if profile.supports(t)]


def check_targets(
    selectors: list[DeviceSelector], profiles: dict[str, DeviceProfile], wanted: list[Target] | None
) -> None:
    """Every requested target must be supported by at least one requested device."""
    if wanted is None:
        return
    for target in wanted:
        if not any(profiles[s.profile].supports(target) for s in selectors):
            supported = sorted(
                {
                    t.name
                    for s in selectors
                    for t in (*profiles[s.profile].targets, *profiles[s.profile].on_request)
                }
            )
            raise UsageError(
                f"no selected device supports {target}; they support: {', '.join(supported)}",
                hint=host_commands(target),
            )
