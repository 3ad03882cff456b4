"""Health and cool-down: an Android persona whose dumpsys replays a recorded capture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ondevice_farm.errors import DeviceTimeoutError
from ondevice_farm.profiles import load_profiles
from ondevice_farm_agents.android.thermal import wait_until_cool
from ondevice_farm_agents.base import AgentSettings, Thermal
from tests.android.adb_peer import AdbPeer
from tests.android.peer_fixtures import one_unit, start_peer

FIXTURES = Path(__file__).parent / "fixtures"
PIXEL8 = {"ro.product.model": "Pixel 8", "ro.product.manufacturer": "Google", "ro.soc.model": "Tensor G3"}


@pytest.fixture
def phone(tmp_path: Path, adb_key: Path) -> Iterator[AdbPeer]:
    recorded = {
        "thermalservice": (FIXTURES / "dumpsys/thermalservice_pixel_memfault.txt").read_text(),
        "battery": (FIXTURES / "dumpsys/battery_usb_full.txt").read_text(),
    }
    peer = start_peer(tmp_path / "phone", adb_key, PIXEL8, dumpsys=recorded)
    try:
        yield peer
    finally:
        peer.stop()


def test_a_phone_is_matched_to_its_profile_and_reports_thermal_and_battery(
    phone: AdbPeer, adb_key: Path
) -> None:
    with one_unit(
        AgentSettings(
            profiles=load_profiles(), adb_tcp_addresses=(phone.address,), adb_key_path=adb_key, io_timeout_s=5
        )
    ) as (agent, unit):
        health = agent.health(unit)
    assert unit.profile == "pixel8"
    assert health.up and health.thermal is not None
    assert health.thermal.status == "none"
    assert health.thermal.temperatures_c["cpu1-silver-usr"] == pytest.approx(32.0)
    assert health.thermal.battery_pct == 100.0


def test_wait_until_cool_returns_once_below_the_limit() -> None:
    readings = iter([40.0, 39.0, 37.5])
    clock = iter(range(100))
    thermal = wait_until_cool(
        lambda: Thermal("none", {"skin": next(readings)}),
        38.0,
        60.0,
        poll_s=1,
        sleep=lambda _: None,
        clock=lambda: float(next(clock)),
    )
    assert thermal.temperatures_c == {"skin": 37.5}


def test_wait_until_cool_gives_up_at_the_deadline() -> None:
    clock = iter(range(0, 1000, 10))
    with pytest.raises(DeviceTimeoutError, match=r"above 38\.0"):
        wait_until_cool(
            lambda: Thermal("severe", {"skin": 45.0}),
            38.0,
            30.0,
            poll_s=1,
            sleep=lambda _: None,
            clock=lambda: float(next(clock)),
        )
