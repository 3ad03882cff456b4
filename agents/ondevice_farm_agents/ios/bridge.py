"""The one place where pymobiledevice3's asyncio world meets the farm's synchronous one.

Every call to a device runs as a coroutine on a private event loop that lives on its own
thread, so agents work the same from plain code, from tests, and from inside a Ray actor
that already runs a loop of its own (where `asyncio.run` would refuse). pymobiledevice3's
exceptions become `FarmError`s here, and nowhere else.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from pymobiledevice3 import exceptions as pmd3

from ondevice_farm.errors import DeviceAuthError, DeviceError, DeviceLostError, DeviceTimeoutError, FarmError

T = TypeVar("T")

#: exceptions that mean "the phone or its connection went away" (retryable on another unit)
_LOST: tuple[type[BaseException], ...] = (
    pmd3.NoDeviceConnectedError,
    pmd3.DeviceNotFoundError,
    pmd3.NotConnectedError,
    pmd3.ConnectionTerminatedError,
    pmd3.MuxException,
    ConnectionError,
    EOFError,
    asyncio.IncompleteReadError,
)
_AUTH: tuple[type[BaseException], ...] = (
    pmd3.PairingError,
    pmd3.NotPairedError,
    pmd3.NotTrustedError,
    pmd3.FatalPairingError,
    pmd3.PasscodeRequiredError,
)
_TIMEOUT: tuple[type[BaseException], ...] = (TimeoutError, asyncio.TimeoutError)
#: services that iOS only offers with Developer Mode on, the developer image mounted, or a tunnel
_DEVELOPER: tuple[type[BaseException], ...] = (
    pmd3.DeveloperModeIsNotEnabledError,
    pmd3.DeveloperDiskImageNotFoundError,
    pmd3.InvalidServiceError,
    pmd3.StartServiceError,
    pmd3.RSDRequiredError,
    pmd3.TunneldConnectionError,
)
_DEVELOPER_HINT = (
    "enable Developer Mode on the phone, mount the developer image "
    "(`pymobiledevice3 mounter auto-mount`), and on iOS 17+ keep "
    "`sudo pymobiledevice3 remote tunneld` running on this host"
)


def device_error(exc: BaseException, where: str) -> FarmError:
    """The `FarmError` a lower-layer exception stands for; `where` names the unit and the step."""
    if isinstance(exc, FarmError):
        return exc
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, _AUTH):
        return DeviceAuthError(f"{where}: the phone refused the pairing ({detail})")
    if isinstance(exc, _DEVELOPER):
        return DeviceError(f"{where}: a developer service is not available ({detail})", hint=_DEVELOPER_HINT)
    if isinstance(exc, pmd3.AppNotInstalledError):
        return DeviceError(f"{where}: {detail}", hint="install FarmRunner (docs/ios-runner.md)")
    if isinstance(exc, pmd3.AppInstallError):
        return DeviceError(f"{where}: installing the app failed ({detail})", hint="check the app's signing")
    # AfcException is an OSError too: a refused file operation is not a lost device.
    if isinstance(exc, pmd3.AfcException):
        return DeviceError(f"{where}: file operation failed ({detail})")
    if isinstance(exc, _LOST):
        return DeviceLostError(f"{where}: the phone disconnected ({detail})")
    if isinstance(exc, _TIMEOUT):
        return DeviceTimeoutError(f"{where}: the phone did not answer in time")
    return DeviceError(f"{where}: {type(exc).__name__}: {detail}")


class AsyncBridge:
    """A private event loop on a daemon thread; `call` runs one coroutine on it and waits.

    Connections opened by a coroutine belong to this loop, so a coroutine opens and closes
    its own: nothing async outlives one `call`.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="farm-ios-loop", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def call(self, coro: Coroutine[Any, Any, T], *, timeout_s: float, where: str) -> T:
        """Run `coro` to completion within `timeout_s`; errors come back as `FarmError`s."""
        future = asyncio.run_coroutine_threadsafe(coro, self._running_loop())
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise DeviceTimeoutError(f"{where}: no answer within {timeout_s:g} s") from None
        except concurrent.futures.CancelledError:
            raise DeviceLostError(f"{where}: the call was cancelled") from None
        except FarmError:
            raise
        except Exception as exc:
            raise device_error(exc, where) from exc

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5.0)
        loop.close()
