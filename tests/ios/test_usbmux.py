"""The real UsbmuxProvider against a usbmuxd peer on loopback (pymobiledevice3's own wire code)."""

from __future__ import annotations

import socket

from ondevice_farm.profiles import DeviceProfile
from ondevice_farm_agents.base import AgentSettings, DeviceUnit
from ondevice_farm_agents.ios.agent import IosAgent

from .usbmuxd_peer import UsbmuxdPeer

USB_PHONE = (7, "00008120-000924940A42201E", "USB")
WIFI_PHONE = (9, "00008110-000E44540A2A801E", "Network")


def agent_on(address: str, profiles: dict[str, DeviceProfile]) -> IosAgent:
    return IosAgent(AgentSettings(profiles=profiles, io_timeout_s=5.0, extra={"ios_usbmux_address": address}))


def test_discovery_lists_usb_phones_and_a_refused_connection_is_a_lost_device(
    profiles: dict[str, DeviceProfile],
) -> None:
    with UsbmuxdPeer([USB_PHONE, WIFI_PHONE]) as peer:
        agent = agent_on(peer.address, profiles)
        try:
            assert agent.discover() == []  # listed, but lockdown could not be reached
            health = agent.health(DeviceUnit("iphone15", USB_PHONE[1], "ios"))
        finally:
            agent.close()

    kinds = [r["MessageType"] for r in peer.requests]
    assert "ListDevices" in kinds
    connects = [r for r in peer.requests if r["MessageType"] == "Connect"]
    assert connects and {r["DeviceID"] for r in connects} == {USB_PHONE[0]}  # USB only by default
    assert socket.ntohs(connects[0]["PortNumber"]) == 62078  # lockdownd
    assert not health.up and "disconnected" in health.reason


def test_no_usbmuxd_means_no_units(profiles: dict[str, DeviceProfile]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as placeholder:
        address = f"127.0.0.1:{placeholder.getsockname()[1]}"
    agent = agent_on(address, profiles)  # nothing listens there any more
    try:
        assert agent.discover() == []
    finally:
        agent.close()
