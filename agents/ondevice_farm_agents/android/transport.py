"""A typed connection to one Android unit over adb-shell, every call bounded in time.

adb-shell is untyped and raises a dozen unrelated exceptions; here they become
`DeviceLostError` (link gone or garbled), `DeviceTimeoutError` (no answer in time),
`DeviceAuthError` (key refused) or `DeviceError` (the device said no). After a lost link
or a timeout the connection is dropped and the next call reconnects.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ondevice_farm.errors import DeviceAuthError, DeviceError, DeviceLostError, DeviceTimeoutError

DEFAULT_IO_TIMEOUT_S = 30.0
DEFAULT_ADB_PORT = 5555
_RC_MARKER = "__farm_rc="

T = TypeVar("T")


@dataclass(frozen=True)
class ShellResult:
    output: str
    exit_code: int

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep:
        return address, DEFAULT_ADB_PORT
    if not port.isdigit():
        raise DeviceError(f"bad ADB address {address!r}: expected host:port")
    return host, int(port)


def _tcp_transport(host: str, port: int) -> Any:
    from adb_shell.transport.tcp_transport import TcpTransport

    class EofAwareTcpTransport(TcpTransport):  # type: ignore[misc]
        """adb-shell's TCP transport reads an empty chunk forever when the peer hangs up, and
        may send only part of a buffer: here a hang-up raises and writes are complete."""

        def bulk_read(self, numbytes: int, transport_timeout_s: float | None) -> bytes:
            data: bytes = super().bulk_read(numbytes, transport_timeout_s)
            if numbytes and not data:
                raise ConnectionResetError(f"{host}:{port} closed the connection")
            return data

        def bulk_write(self, data: bytes, transport_timeout_s: float | None) -> int:
            view = memoryview(data)
            deadline = time.monotonic() + (transport_timeout_s or DEFAULT_IO_TIMEOUT_S)
            while view:
                left = deadline - time.monotonic()
                _, writable, _ = select.select([], [self._connection], [], max(left, 0))
                if not writable:
                    raise TimeoutError(f"sending to {host}:{port} timed out")
                sent = self._connection.send(view)
                view = view[sent:]
            return len(data)

    return EofAwareTcpTransport(host, port)


class AdbConnection:
    """One unit: `tcp:<host>:<port>` or `usb:<serial>`."""

    def __init__(
        self,
        serial: str,
        signer: Any,
        io_timeout_s: float = DEFAULT_IO_TIMEOUT_S,
        cancelled: Callable[[], bool] | None = None,
    ) -> None:
        self.serial = serial
        self.io_timeout_s = io_timeout_s
        #: whether the job this unit runs now was cancelled: a job waited for by polling
        #: (`ondevice_farm_agents.android.jobs`) stops its runner and ends early
        self.cancelled: Callable[[], bool] = cancelled or (lambda: False)
        self._signer = signer
        self._device: Any = None

    def connect(self) -> None:
        if self._device is not None:
            return
        from adb_shell.adb_device import AdbDevice

        asked_user = False

        def on_new_key(_device: Any) -> None:
            nonlocal asked_user
            asked_user = True

        try:
            device = AdbDevice(self._transport(), default_transport_timeout_s=self.io_timeout_s)
            device.connect(
                rsa_keys=[self._signer],
                transport_timeout_s=self.io_timeout_s,
                auth_timeout_s=self.io_timeout_s,
                read_timeout_s=self.io_timeout_s,
                auth_callback=on_new_key,
            )
        except Exception as exc:
            error = convert(exc, f"connecting to {self.serial}")
            if asked_user and isinstance(error, DeviceTimeoutError):
                raise DeviceAuthError(f"{self.serial} did not accept this host's ADB key") from None
            raise error from None
        self._device = device

    def shell(self, command: str, timeout_s: float | None = None) -> ShellResult:
        """Run `command` under the device's /bin/sh; its output and exit status."""
        wrapped = f"({command}); printf '\\n{_RC_MARKER}%d\\n' $?"
        text: str = self._call(
            f"shell {command[:60]!r}",
            lambda d: d.shell(
                wrapped,
                transport_timeout_s=self.io_timeout_s,
                read_timeout_s=self.io_timeout_s,
                timeout_s=timeout_s or self.io_timeout_s,
                decode=True,
            ),
        )
        text = text.replace("\r\n", "\n")
        output, marker, rest = text.rpartition(f"\n{_RC_MARKER}")
        if not marker:
            raise DeviceLostError(f"{self.serial}: the shell ended before `{command[:60]}` finished")
        return ShellResult(output, int(rest.strip() or "255"))

    def push(self, local: Path, device_path: str) -> None:
        self._call(
            f"push to {device_path}",
            lambda d: d.push(
                str(local),
                device_path,
                transport_timeout_s=self.io_timeout_s,
                read_timeout_s=self.io_timeout_s,
            ),
        )

    def pull(self, device_path: str, local: Path) -> None:
        self._call(
            f"pull of {device_path}",
            lambda d: d.pull(
                device_path,
                str(local),
                transport_timeout_s=self.io_timeout_s,
                read_timeout_s=self.io_timeout_s,
            ),
        )

    def close(self) -> None:
        device, self._device = self._device, None
        if device is not None:
            with suppress(Exception):
                device.close()

    def _transport(self) -> Any:
        kind, _, rest = self.serial.partition(":")
        if kind == "tcp":
            return _tcp_transport(*parse_address(rest))
        if kind == "usb":
            try:
                from adb_shell.transport.usb_transport import UsbTransport
            except ImportError:
                raise DeviceError(
                    "USB support needs libusb1", hint="pip install 'adb-shell[usb]' (and libusb on the host)"
                ) from None
            return UsbTransport.find_adb(serial=rest, default_transport_timeout_s=self.io_timeout_s)
        raise DeviceError(f"unknown ADB serial {self.serial!r}: expected tcp:<host:port> or usb:<serial>")

    def _call(self, what: str, action: Callable[[Any], T]) -> T:
        self.connect()
        try:
            return action(self._device)
        except Exception as exc:
            error = convert(exc, f"{what} on {self.serial}")
            if isinstance(error, DeviceLostError | DeviceTimeoutError):
                self.close()
            raise error from None


def convert(exc: BaseException, what: str) -> DeviceError:
    """adb-shell's (and the socket's) exception -> the farm's, for `what` was being done."""
    from adb_shell import exceptions as adb

    if isinstance(exc, adb.DeviceAuthError):
        return DeviceAuthError(f"{what}: the device refused this host's key ({exc})")
    if isinstance(exc, adb.AdbTimeoutError | adb.TcpTimeoutException | TimeoutError | socket.timeout):
        return DeviceTimeoutError(f"{what}: no answer in time ({exc})")
    lost = (
        OSError,
        adb.InvalidChecksumError,
        adb.InvalidCommandError,
        adb.InvalidResponseError,
        adb.AdbConnectionError,
        adb.UsbReadFailedError,
        adb.UsbWriteFailedError,
        adb.UsbDeviceNotFoundError,
    )
    if isinstance(exc, lost):
        return DeviceLostError(f"{what}: the link failed ({type(exc).__name__}: {exc})")
    if isinstance(exc, adb.AdbCommandFailureException | adb.PushFailedError | adb.DevicePathInvalidError):
        return DeviceError(f"{what}: the device refused ({exc})")
    return DeviceError(f"{what}: {type(exc).__name__}: {exc}")
