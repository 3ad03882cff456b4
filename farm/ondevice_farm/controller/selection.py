"""Which units and targets a submission asks for: `--devices` and `--targets`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


#: `pixel8:*`: a job on every unit of the profile that is up when the submission is planned
EVERY_UNIT = "*"


def needs_units(text: str) -> bool:
    """Whether `--devices` can only be read against the units up now (`all`, `pixel8:*`)."""
    parts = [p.strip() for p in text.split(",")]
    return parts == ["all"] or any(p.endswith(":" + EVERY_UNIT) for p in parts)


def parse_devices(
    text: str, profiles: dict[str, DeviceProfile], attached: Mapping[str, Sequence[str]] | None = None
) -> list[DeviceSelector]:
    """`host-cpu,pixel8:ABC` -> selectors; `all` -> every profile with a unit up; `pixel8:*` ->
    one selector per unit of the profile that is up. `attached`: profile -> serials of its units
    up (what `all` and `*` read)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise UsageError("--devices is empty; name at least one device profile (see `farm devices`)")
    units = {p: list(serials) for p, serials in (attached or {}).items() if serials}
    if parts == ["all"]:
        if not units:
            raise UsageError("--devices all: no units are attached", hint="`farm devices` lists them")
        return [DeviceSelector(name) for name in sorted(units)]
    selectors: list[DeviceSelector] = []
    for part in parts:
        profile, _, serial = part.partition(":")
        if profile not in profiles:
            raise UsageError(f"unknown device {profile!r}; known profiles: {', '.join(sorted(profiles))}")
        if serial != EVERY_UNIT:
            selectors.append(DeviceSelector(profile, serial or None))
            continue
        if attached is None:
            raise UsageError(f"{part}: every unit of {profile} can only be read against the units up")
        if not units.get(profile):
            raise UsageError(f"{part}: no unit of {profile} is up", hint="`farm devices` lists the units")
        selectors += [
            DeviceSelector(profile, s)
            for s in sorted(units[profile])
            if DeviceSelector(profile, s) not in selectors
        ]
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
