"""The agent's battery probe on recorded `dumpsys battery` output (fixtures/battery/) and sysfs text:
when a unit can give an energy figure, and the reason it cannot."""

from __future__ import annotations

import pytest

from ondevice_farm.errors import UsageError
from ondevice_farm_agents.android.battery import DEFAULT_BATTERY_DIR, EnergySettings, parse_probe
from tests.android.battery_scripts import DISCHARGING_DUMPSYS, USB_CHARGING_DUMPSYS

MARK = "__farm_battery_sysfs__"
#: what AOSP's BatteryService.dumpInternal prints under its header once `dumpsys battery unplug` froze it
UPDATES_STOPPED = "  (UPDATES STOPPED -- use 'reset' to restart)\n"


def _probe(dumpsys: str, status: str, current: str, voltage: str) -> str:
    return f"{dumpsys}{MARK}\n{status}\n{current}\n{voltage}\n"


def test_an_unplugged_phone_with_readable_sysfs_can_be_measured() -> None:
    state = parse_probe(_probe(DISCHARGING_DUMPSYS, "Not charging", "-150000", "3815175"))
    assert state.has_service and not state.powered and state.service_status == "3"
    assert state.absence(DEFAULT_BATTERY_DIR) == "" and state.notes() == []


def test_a_phone_on_usb_is_charging_and_the_reason_says_how_to_measure_anyway() -> None:
    state = parse_probe(_probe(USB_CHARGING_DUMPSYS, "Charging", "-326171", "3888173"))
    assert state.powered == ("USB",)
    reason = state.absence(DEFAULT_BATTERY_DIR)
    assert reason.startswith("the device is charging (USB powered)")
    assert "dumpsys battery unplug" in reason and "dumpsys battery reset" in reason


def test_after_dumpsys_battery_unplug_it_measures_and_notes_the_charger() -> None:
    header, _, rest = USB_CHARGING_DUMPSYS.partition("\n")
    frozen = f"{header}\n{UPDATES_STOPPED}" + rest.replace("USB powered: true", "USB powered: false")
    state = parse_probe(_probe(frozen, "Charging", "-326171", "3888173"))
    assert state.updates_stopped and not state.powered
    assert state.absence(DEFAULT_BATTERY_DIR) == ""
    (note,) = state.notes()
    assert "frozen" in note and "sysfs status: Charging" in note


def test_a_board_without_dumpsys_is_judged_by_its_sysfs_status() -> None:
    assert parse_probe(_probe("", "Discharging", "812000", "3900000")).absence(DEFAULT_BATTERY_DIR) == ""
    charging = parse_probe(_probe("", "Charging", "-812000", "3900000")).absence(DEFAULT_BATTERY_DIR)
    assert charging.startswith("the battery reports that it is charging")


def test_closed_sysfs_is_absent_with_a_reason() -> None:
    state = parse_probe(_probe(DISCHARGING_DUMPSYS, "", "", ""))
    assert not state.sysfs_readable
    assert "no readable /sys/class/power_supply/battery/current_now" in state.absence(DEFAULT_BATTERY_DIR)


@pytest.mark.parametrize("key", ["energy_idle_s", "energy_sample_ms"])
def test_a_bad_energy_setting_is_a_usage_error(key: str) -> None:
    with pytest.raises(UsageError, match=key):
        EnergySettings.from_extra({key: "soon"})
