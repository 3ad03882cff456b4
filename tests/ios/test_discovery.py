"""Discovery: usbmux serials -> lockdown values -> the device profile that recognises them."""

from __future__ import annotations

import pytest

from ondevice_farm.errors import DeviceAuthError, UsageError
from ondevice_farm_agents.base import AgentSettings
from ondevice_farm_agents.ios.agent import IosAgent

from .conftest import IPHONE13, MakeAgent, MakePhone, MakeRequest


def test_an_attached_iphone15_becomes_a_unit_of_its_profile(
    make_agent: MakeAgent, make_phone: MakePhone
) -> None:
    agent = make_agent(make_phone())

    units = agent.discover()

    assert [(u.profile, u.serial, u.platform) for u in units] == [
        ("iphone15", "00008120-000924940A42201E", "ios")
    ]
    assert units[0].properties["ProductType"] == "iPhone15,4"
    assert units[0].properties["ProductVersion"] == "26.5"
    assert units[0].properties["HardwareModel"] == "D37AP"


def test_a_phone_no_profile_recognises_is_left_out(make_agent: MakeAgent, make_phone: MakePhone) -> None:
    agent = make_agent(make_phone(fixture=IPHONE13), make_phone())

    assert [u.profile for u in agent.discover()] == ["iphone15"]


def test_unplugged_phones_and_an_empty_usbmux_give_no_units(
    make_agent: MakeAgent, make_phone: MakePhone
) -> None:
    phone = make_phone()
    phone.plugged = False

    assert make_agent(phone).discover() == []
    assert make_agent().discover() == []


def test_udids_setting_restricts_the_units(make_agent: MakeAgent, make_phone: MakePhone) -> None:
    phones = [make_phone(udid="00008120-0000000000000001"), make_phone(udid="00008120-0000000000000002")]
    agent = make_agent(*phones, extra={"ios_udids": "00008120-0000000000000002"})

    assert [u.serial for u in agent.discover()] == ["00008120-0000000000000002"]


def test_health_reports_the_battery_and_a_lost_phone(make_agent: MakeAgent, make_phone: MakePhone) -> None:
    phone = make_phone()
    agent = make_agent(phone)
    (unit,) = agent.discover()

    health = agent.health(unit)
    assert health.up and health.thermal is not None and health.thermal.battery_pct == 87.0

    phone.plugged = False
    lost = agent.health(unit)
    assert not lost.up and "disconnected" in lost.reason


def test_a_phone_that_refuses_pairing_is_an_auth_error_not_a_lost_one(
    make_agent: MakeAgent,
    make_phone: MakePhone,
    make_request: MakeRequest,
) -> None:
    phone = make_phone()
    agent = make_agent(phone)
    (unit,) = agent.discover()
    phone.pairing_refused = True

    assert agent.discover() == []
    assert "refused the pairing" in agent.health(unit).reason
    with pytest.raises(DeviceAuthError) as caught:
        agent.prepare(unit, make_request())
    assert not caught.value.retryable and "accept" in caught.value.hint


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"ios_bundleid": "x"}, "unknown iOS agent setting 'ios_bundleid'"),
        ({"ios_tunneld": "localhost"}, "ios_tunneld must be host:port"),
        ({"ios_connection": "wifi"}, "ios_connection must be 'usb' or 'any'"),
    ],
)
def test_bad_settings_are_usage_errors(extra: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        IosAgent(AgentSettings(extra=extra))
