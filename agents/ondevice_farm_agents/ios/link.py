"""One attached phone as the capability services see it: its UDID, its provider, the bridge."""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from ondevice_farm_agents.ios.bridge import AsyncBridge
from ondevice_farm_agents.ios.provider import ConnectionProvider

T = TypeVar("T")


@dataclass(frozen=True)
class DeviceLink:
    bridge: AsyncBridge
    provider: ConnectionProvider
    serial: str
    io_timeout_s: float

    def call(self, coro: Coroutine[Any, Any, T], what: str, *, timeout_s: float | None = None) -> T:
        """Run one device step; `what` names it in errors (`<udid>: <what>: ...`)."""
        return self.bridge.call(
            coro, timeout_s=timeout_s or self.io_timeout_s, where=f"{self.serial}: {what}"
        )
