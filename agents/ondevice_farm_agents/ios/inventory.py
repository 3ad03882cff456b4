"""What a phone is: its lockdown values, reduced to the strings profiles match on."""

from __future__ import annotations

from typing import Any

from ondevice_farm_agents.ios.link import DeviceLink

#: lockdown keys kept as unit properties (`ideviceinfo` prints the same names)
INVENTORY_KEYS = (
    "ProductType",
    "ProductVersion",
    "BuildVersion",
    "HardwareModel",
    "HardwarePlatform",
    "CPUArchitecture",
    "DeviceClass",
    "DeviceName",
    "UniqueDeviceID",
)
BATTERY_DOMAIN = "com.apple.mobile.battery"


def read_properties(link: DeviceLink) -> dict[str, str]:
    """The phone's inventory: `ProductType` (e.g. `iPhone15,4`), iOS version, chip platform, ..."""

    async def read() -> dict[str, Any]:
        async with link.provider.lockdown(link.serial) as lockdown:
            values = await lockdown.get_value()
        return dict(values or {})

    values = link.call(read(), "reading lockdown values")
    return {key: _text(values[key]) for key in INVENTORY_KEYS if key in values}


def read_battery_pct(link: DeviceLink) -> float | None:
    async def read() -> Any:
        async with link.provider.lockdown(link.serial) as lockdown:
            return await lockdown.get_value(domain=BATTERY_DOMAIN, key="BatteryCurrentCapacity")

    value = link.call(read(), "reading the battery level")
    return float(value) if isinstance(value, int | float) else None


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
