"""Scripted batteries for the ADB peer, built from recorded real readings (fixtures/battery/).

- `PIXEL_DISCHARGING`: a Tensor Pixel off the charger, signing a discharge negative (the kernel's
  documented convention and BatteryManager's); idle at its recorded idle draw, loaded at a
  recorded in-use draw; sysfs `status` "Not charging", as Tensor Pixels report while discharging.
- `QUALCOMM_DISCHARGING`: the same levels on a unit that signs a discharge positive (the Pixel 3a's
  and Mi 8's Qualcomm kernels: the Mi 8 reads negative while charging).
- `MI8_CHARGING`: the Mi 8 on a charger as recorded, with the Pixel 8 Pro's `dumpsys battery`
  captured on USB power.
"""

from __future__ import annotations

from pathlib import Path

from tests.android.adb_peer import BatteryScript

FIXTURES = Path(__file__).parent / "fixtures" / "battery"


def _readings() -> dict[tuple[str, str], str]:
    values = {}
    for line in (FIXTURES / "sysfs_readings.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            source, _, what, value = (part.strip() for part in line.split("|"))
            values[(source, what)] = value
    return values


READINGS = _readings()
DISCHARGING_DUMPSYS = (FIXTURES / "dumpsys_honor_alt_nx1_discharging.txt").read_text()
USB_CHARGING_DUMPSYS = (FIXTURES / "dumpsys_pixel8pro_usb_charging.txt").read_text()

IDLE_UA = int(READINGS[("acc-201", "current, mA magnitude")]) * 1000
LOAD_UA = abs(int(READINGS[("termux-battery-status", "BatteryManager current, µA")]))

PIXEL_DISCHARGING = BatteryScript(
    idle_ua=IDLE_UA,
    load_ua=LOAD_UA,
    voltage_uv=int(READINGS[("AccA-35", "VOLTAGE_NOW, µV")]),
    status=READINGS[("acc-201", "status")],
    dumpsys=DISCHARGING_DUMPSYS,
    discharge_sign=-1,
)
QUALCOMM_DISCHARGING = BatteryScript(
    idle_ua=IDLE_UA,
    load_ua=LOAD_UA,
    voltage_uv=int(READINGS[("AccA-27", "VOLTAGE_NOW, µV")]),
    status="Discharging",
    dumpsys=DISCHARGING_DUMPSYS,
    discharge_sign=+1,
)
MI8_CHARGING = BatteryScript(
    idle_ua=IDLE_UA,
    load_ua=LOAD_UA,
    voltage_uv=int(READINGS[("AccA-27", "VOLTAGE_NOW, µV")]),
    status=READINGS[("AccA-27", "STATUS")],
    dumpsys=USB_CHARGING_DUMPSYS,
    discharge_sign=+1,
    charge_ua=abs(int(READINGS[("AccA-27", "CURRENT_NOW, µA")])),
)
