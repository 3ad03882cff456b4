"""How the agent reaches a phone: a connection provider that opens pymobiledevice3 services.

The protocols below name the few methods of pymobiledevice3's services the agent calls,
with the same names and arguments, so the real services satisfy them as they are and the
test fakes (`ondevice_farm_agents.ios.fakes`) stand in for them one for one. `UsbmuxProvider` is the
real provider: usbmuxd for discovery and lockdown services, and for the developer service
that launches apps (DVT process control) the RemoteXPC tunnel that iOS 17+ requires,
served by a running `pymobiledevice3 remote tunneld`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from re import Pattern
from typing import Any, Protocol

DEFAULT_TUNNELD_ADDRESS = ("127.0.0.1", 49151)
#: the first iOS major version whose developer services are reachable only through RSD
TUNNEL_FROM_IOS_MAJOR = 17


class Lockdown(Protocol):
    """`pymobiledevice3.lockdown.LockdownClient`: the device's property store."""

    async def get_value(self, domain: str | None = None, key: str | None = None) -> Any: ...


class InstallationProxy(Protocol):
    """`pymobiledevice3.services.installation_proxy.InstallationProxyService`."""

    async def get_apps(
        self,
        application_type: str = "Any",
        calculate_sizes: bool = False,
        bundle_identifiers: list[str] | None = None,
    ) -> dict[str, dict[str, Any]]: ...

    async def install_from_local(self, package_path: Path, cmd: str = "Install") -> None: ...


class ContainerFiles(Protocol):
    """`pymobiledevice3.services.house_arrest.HouseArrestService`: AFC rooted at an app container."""

    async def exists(self, filename: str) -> bool: ...

    async def makedirs(self, filename: str) -> Any: ...

    async def listdir(self, filename: str) -> list[str]: ...

    async def set_file_contents(self, filename: str, data: bytes) -> None: ...

    async def get_file_contents(self, filename: str) -> bytes: ...

    async def rename(self, source: str, target: str) -> None: ...

    async def rm(
        self, filename: str, match: Pattern[str] | None = None, force: bool = False
    ) -> list[str]: ...


class ProcessControl(Protocol):
    """`pymobiledevice3.services.dvt.instruments.process_control.ProcessControl`."""

    async def launch(
        self,
        bundle_id: str,
        arguments: list[str] | None = None,
        kill_existing: bool = True,
    ) -> int: ...

    async def kill(self, pid: int) -> None: ...

    async def process_identifier_for_bundle_identifier(self, app_bundle_identifier: str) -> int: ...


class Diagnostics(Protocol):
    """`pymobiledevice3.services.diagnostics.DiagnosticsService` (the diagnostics relay)."""

    async def ioregistry(
        self, plane: str | None = None, name: str | None = None, ioclass: str | None = None
    ) -> dict[str, Any] | None: ...


class ConnectionProvider(Protocol):
    """Opens the services of one attached phone; each context closes what it opened."""

    async def serials(self) -> list[str]:
        """UDIDs of the phones attached now."""
        ...

    def lockdown(self, serial: str) -> AbstractAsyncContextManager[Lockdown]: ...

    def installation_proxy(self, serial: str) -> AbstractAsyncContextManager[InstallationProxy]: ...

    def app_container(self, serial: str, bundle_id: str) -> AbstractAsyncContextManager[ContainerFiles]: ...

    def process_control(self, serial: str) -> AbstractAsyncContextManager[ProcessControl]: ...

    def diagnostics(self, serial: str) -> AbstractAsyncContextManager[Diagnostics]: ...


@dataclass(frozen=True)
class UsbmuxProvider:
    """The real provider: usbmuxd (USB and Wi-Fi pairs) plus tunneld for iOS 17+ developer services."""

    usbmux_address: str | None = None
    tunneld_address: tuple[str, int] = DEFAULT_TUNNELD_ADDRESS
    #: USB only, unless Wi-Fi-paired phones are wanted too
    connection_type: str | None = "USB"

    async def serials(self) -> list[str]:
        from pymobiledevice3 import usbmux

        devices = await usbmux.list_devices(usbmux_address=self.usbmux_address)
        wanted = [
            d for d in devices if self.connection_type is None or d.connection_type == self.connection_type
        ]
        return sorted({d.serial for d in wanted})

    @asynccontextmanager
    async def lockdown(self, serial: str) -> AsyncIterator[Lockdown]:
        from pymobiledevice3.lockdown import create_using_usbmux

        client = await create_using_usbmux(
            serial=serial,
            autopair=False,
            connection_type=self.connection_type,
            usbmux_address=self.usbmux_address,
        )
        try:
            if not client.paired:
                # Pairing needs a person at the phone: it is set up once (docs/ios.md), never mid-job.
                from pymobiledevice3.exceptions import NotPairedError

                raise NotPairedError(f"{serial} has not trusted this host (`pymobiledevice3 lockdown pair`)")
            yield client
        finally:
            await client.close()

    @asynccontextmanager
    async def installation_proxy(self, serial: str) -> AsyncIterator[InstallationProxy]:
        from pymobiledevice3.services.installation_proxy import InstallationProxyService

        async with self.lockdown(serial) as client, InstallationProxyService(lockdown=client) as service:  # type: ignore[arg-type]
            yield service

    @asynccontextmanager
    async def app_container(self, serial: str, bundle_id: str) -> AsyncIterator[ContainerFiles]:
        from pymobiledevice3.services.house_arrest import HouseArrestService

        async with self.lockdown(serial) as client:
            service = await HouseArrestService.create(client, bundle_id)  # type: ignore[arg-type]
            async with service:
                yield service

    @asynccontextmanager
    async def diagnostics(self, serial: str) -> AsyncIterator[Diagnostics]:
        from pymobiledevice3.services.diagnostics import DiagnosticsService

        async with self.lockdown(serial) as client, DiagnosticsService(lockdown=client) as service:  # type: ignore[arg-type]
            yield service

    @asynccontextmanager
    async def process_control(self, serial: str) -> AsyncIterator[ProcessControl]:
        from pymobiledevice3.services.dvt.instruments.dvt_provider import DvtProvider
        from pymobiledevice3.services.dvt.instruments.process_control import (
            ProcessControl as DvtProcessControl,
        )

        async with (
            self._developer_provider(serial) as developer,
            DvtProvider(developer) as dvt,
            DvtProcessControl(dvt) as control,
        ):
            yield control

    @asynccontextmanager
    async def _developer_provider(self, serial: str) -> AsyncIterator[Any]:
        """Lockdown below iOS 17; above it, the RemoteServiceDiscovery of tunneld's tunnel."""
        async with self.lockdown(serial) as client:
            version = str(await client.get_value(key="ProductVersion") or "0")
            if int(version.split(".")[0]) < TUNNEL_FROM_IOS_MAJOR:
                yield client
                return
        from pymobiledevice3.exceptions import TunneldConnectionError
        from pymobiledevice3.tunneld.api import get_tunneld_device_by_udid

        rsd = await get_tunneld_device_by_udid(serial, tunneld_address=self.tunneld_address)
        if rsd is None:
            raise TunneldConnectionError(
                f"tunneld at {self.tunneld_address[0]}:{self.tunneld_address[1]} has no tunnel to {serial}"
            )
        try:
            yield rsd
        finally:
            await rsd.close()
