"""A unit's thermal state: `dumpsys thermalservice` and `dumpsys battery` on Android,
`/sys/class/thermal` on Linux boards; and waiting for a unit to cool down."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from ondevice_farm.errors import DeviceTimeoutError
from ondevice_farm_agents.base import Thermal

#: android.os.Temperature.ThrottlingSeverity / PowerManager.THERMAL_STATUS_* names
THERMAL_STATUS = ("none", "light", "moderate", "severe", "critical", "emergency", "shutdown")
_TEMPERATURE = re.compile(
    r"Temperature\{mValue=(?P<value>-?[0-9.]+), mType=(?P<type>-?\d+), mName=(?P<name>[^,}]+)"
)
_STATUS = re.compile(r"^\s*Thermal Status: (\d+)", re.MULTILINE)
#: section headers of `dumpsys thermalservice`; HAL readings are current, the cache may be stale
_HAL = "Current temperatures from HAL:"
_CACHED = "Cached temperatures:"


def _section(text: str, header: str) -> list[str]:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == header:
            block = []
            for following in lines[i + 1 :]:
                if not following.strip().startswith("Temperature{"):
                    break
                block.append(following)
            return block
    return []


def parse_thermalservice(text: str) -> Thermal:
    """`dumpsys thermalservice` -> status word and temperatures by sensor name (HAL first)."""
    status_match = _STATUS.search(text)
    code = int(status_match.group(1)) if status_match else -1
    status = THERMAL_STATUS[code] if 0 <= code < len(THERMAL_STATUS) else "unknown"
    lines = _section(text, _HAL) or _section(text, _CACHED)
    temperatures = {}
    for line in lines:
        match = _TEMPERATURE.search(line)
        if match:
            temperatures[match["name"].strip()] = float(match["value"])
    return Thermal(status=status, temperatures_c=temperatures)


def parse_battery(text: str) -> dict[str, str]:
    """`dumpsys battery` -> its `key: value` lines (level, temperature in tenths of a degree, ...)."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition(":")
        if sep and value.strip():
            values[key.strip()] = value.strip()
    return values


def battery_percent(values: dict[str, str]) -> float | None:
    try:
        return 100.0 * int(values["level"]) / int(values.get("scale", "100") or "100")
    except (KeyError, ValueError, ZeroDivisionError):
        return None


def with_battery(thermal: Thermal, battery_text: str) -> Thermal:
    values = parse_battery(battery_text)
    temps = dict(thermal.temperatures_c)
    if values.get("temperature", "").lstrip("-").isdigit():
        temps.setdefault("battery", int(values["temperature"]) / 10.0)
    return Thermal(status=thermal.status, temperatures_c=temps, battery_pct=battery_percent(values))


def parse_sysfs_zones(text: str) -> Thermal:
    """Lines of `<type> <millidegrees>` (from /sys/class/thermal/thermal_zone*) -> `Thermal`."""
    temperatures = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            temperatures[parts[0]] = int(parts[1]) / 1000.0
    return Thermal(status="sysfs", temperatures_c=temperatures)


def hottest_c(thermal: Thermal) -> float | None:
    return max(thermal.temperatures_c.values(), default=None)


def wait_until_cool(
    read: Callable[[], Thermal],
    max_start_temperature_c: float | None,
    deadline_s: float,
    poll_s: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Thermal:
    """Poll `read` until the hottest sensor is at or below the limit; raise past the deadline."""
    end = clock() + deadline_s
    while True:
        thermal = read()
        hottest = hottest_c(thermal)
        if max_start_temperature_c is None or hottest is None or hottest <= max_start_temperature_c:
            return thermal
        if clock() >= end:
            raise DeviceTimeoutError(
                f"the unit stayed at {hottest:.1f} °C, above {max_start_temperature_c:.1f} °C, "
                f"for {deadline_s:.0f} s",
                hint="let it cool (screen off, out of its case, not fast-charging) or raise the limit",
            )
        sleep(poll_s)
