"""What an attached unit is: its `getprop` properties, matched to a device profile."""

from __future__ import annotations

import re

from ondevice_farm.profiles import DeviceProfile, match_profile
from ondevice_farm_agents.base import DeviceUnit

#: the properties kept with a unit (the rest of getprop's few hundred are noise here)
INVENTORY_PROPERTIES = (
    "ro.product.model",
    "ro.product.manufacturer",
    "ro.product.device",
    "ro.product.name",
    "ro.board.platform",
    "ro.soc.model",
    "ro.soc.manufacturer",
    "ro.build.version.sdk",
    "ro.build.version.release",
    "ro.product.cpu.abi",
    "ro.hardware",
)
_LINE = re.compile(r"^\[(?P<key>[^\]]+)\]: \[(?P<value>.*)\]$")


def parse_getprop(text: str) -> dict[str, str]:
    """`getprop`'s `[key]: [value]` lines -> a dict; other lines (multi-line values) are skipped."""
    props = {}
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match:
            props[match["key"]] = match["value"]
    return props


def inventory(props: dict[str, str]) -> dict[str, str]:
    return {k: props[k] for k in INVENTORY_PROPERTIES if props.get(k)}


def profile_hint(props: dict[str, str], serial: str) -> str:
    """What to write when a unit matches no profile."""
    model = props.get("ro.product.model", "unknown")
    soc = props.get("ro.soc.model") or props.get("ro.board.platform", "")
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") or "my-device"
    return (
        f"no device profile recognises {serial} ({model}, SoC {soc or 'unknown'}); "
        f"add device_profiles/{slug}.yaml with platform: android and "
        f"recognise: {{ro.product.model: {model!r}}}"
    )


def make_unit(serial: str, props: dict[str, str], profiles: dict[str, DeviceProfile]) -> DeviceUnit:
    """A unit for `serial`; unmatched units get profile "" and a `hint` property."""
    kept = inventory(props)
    profile = match_profile(props, profiles, "android")
    if profile is None:
        return DeviceUnit("", serial, "android", {**kept, "hint": profile_hint(props, serial)})
    return DeviceUnit(profile.name, serial, "android", kept)
