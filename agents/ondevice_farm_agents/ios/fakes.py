"""Fakes of the pymobiledevice3 services the iOS agent uses, over one in-memory phone.

`FakePhone` holds what a phone holds: lockdown values, installed apps, each app's container
as an in-memory file system, running processes and a thermal state. `FakeProvider` opens
fake services over it with the same method names and behaviour as pymobiledevice3's
(`get_value`, `get_apps`/`install_from_local`, AFC `exists`/`set_file_contents`/...,
DVT `launch`/`kill`), raising pymobiledevice3's own exceptions, so everything above the
service boundary is the agent's real code. An "installed" app is a Python callable (see
`ondevice_farm_agents.ios.standin_app`) started on a thread when launched. Tests, docs and demos share it.
"""

from __future__ import annotations

import asyncio
import plistlib
import posixpath
import threading
import zipfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from re import Pattern
from typing import Any

from pymobiledevice3.exceptions import (
    AfcException,
    AfcFileNotFoundError,
    AppInstallError,
    AppNotInstalledError,
    ConnectionTerminatedError,
    NoDeviceConnectedError,
    PasswordRequiredError,
)

from ondevice_farm_agents.ios.provider import (
    ContainerFiles,
    Diagnostics,
    InstallationProxy,
    Lockdown,
    ProcessControl,
)

#: an installed app's code: called on its own thread with (container, launch arguments, process)
AppProgram = Callable[["AppFiles", list[str], "FakeProcess"], None]
THERMAL_STATES = ("nominal", "fair", "serious", "critical")


def parse_ideviceinfo(text: str) -> dict[str, Any]:
    """Lockdown values from `ideviceinfo` key: value output (top-level scalars; comments with #)."""
    values: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith(("#", " ")) or ": " not in line:
            continue
        key, raw = line.split(": ", 1)
        value: Any = raw
        if raw in ("true", "false"):
            value = raw == "true"
        elif raw.isdigit():
            value = int(raw)
        values[key] = value
    return values


class AppFiles:
    """One app container: files and directories by path relative to the container root."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {""}

    def read(self, path: str) -> bytes:
        with self.lock:
            if path not in self.files:
                raise AfcFileNotFoundError(f"no such file {path}", None, path)
            return self.files[path]

    def write(self, path: str, data: bytes) -> None:
        with self.lock:
            if posixpath.dirname(path) not in self.dirs:
                raise AfcFileNotFoundError(f"no such directory {posixpath.dirname(path)}", None, path)
            self.files[path] = bytes(data)

    def makedirs(self, path: str) -> None:
        with self.lock:
            parts = path.strip("/").split("/")
            for i in range(1, len(parts) + 1):
                self.dirs.add("/".join(parts[:i]))

    def rename(self, source: str, target: str) -> None:
        """Atomic, as on the phone: files and whole directories move in one step."""
        with self.lock:
            if source in self.files:
                self.files[target] = self.files.pop(source)
                return
            if source not in self.dirs:
                raise AfcFileNotFoundError(f"no such path {source}", None, source)
            for table in (self.files,):
                for path in [p for p in table if p.startswith(source + "/")]:
                    table[target + path[len(source) :]] = table.pop(path)
            for path in [d for d in self.dirs if d == source or d.startswith(source + "/")]:
                self.dirs.discard(path)
                self.dirs.add(target + path[len(source) :])

    def exists(self, path: str) -> bool:
        with self.lock:
            return path in self.files or path.strip("/") in self.dirs

    def listdir(self, path: str) -> list[str]:
        with self.lock:
            prefix = path.strip("/") + "/"
            children = {
                p[len(prefix) :].split("/")[0] for p in (*self.files, *self.dirs) if p.startswith(prefix)
            }
            return sorted(children)

    def remove_tree(self, path: str) -> None:
        with self.lock:
            path = path.strip("/")
            self.files = {p: d for p, d in self.files.items() if p != path and not p.startswith(path + "/")}
            self.dirs = {d for d in self.dirs if d != path and not d.startswith(path + "/")}


@dataclass
class FakeProcess:
    pid: int
    bundle_id: str
    killed: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return not self.killed.is_set() and self.thread is not None and self.thread.is_alive()


@dataclass
class InstalledApp:
    bundle_id: str
    version: str
    program: AppProgram | None
    files: AppFiles = field(default_factory=AppFiles)


class FakePhone:
    """One phone's state. `programs` maps bundle ids to the code their app runs when launched."""

    def __init__(
        self,
        lockdown_values: dict[str, Any],
        programs: dict[str, AppProgram] | None = None,
        battery_pct: int = 87,
    ) -> None:
        self.lockdown_values = dict(lockdown_values)
        self.serial = str(lockdown_values["UniqueDeviceID"])
        self.programs = dict(programs or {})
        self.battery_pct = battery_pct
        self.apps: dict[str, InstalledApp] = {}
        self.processes: dict[int, FakeProcess] = {}
        self.plugged = True
        #: the phone is locked with a passcode and has not trusted this host
        self.pairing_refused = False
        #: successive readings of ProcessInfo.thermalState; the last one repeats
        self.thermal_readings: list[str] = ["nominal"]
        #: the IORegistry entry of class IOPMPowerSource the diagnostics relay serves: `idle`
        #: while no app of the phone runs, `busy` while one does (None: the relay returns none)
        self.battery_registry: dict[str, dict[str, Any] | None] = {"idle": None, "busy": None}
        #: every service call, as (operation, path or bundle id), for tests to count
        self.operations: list[tuple[str, str]] = []
        self._unplug_rules: list[tuple[str, str, list[int]]] = []
        self._next_pid = 400

    def unplug_when(self, operation: str, path_contains: str = "", after: int = 0) -> None:
        """Pull the cable (once) at the matching call, after `after` earlier matching calls went through."""
        self._unplug_rules.append((operation, path_contains, [after]))

    def thermal_state(self) -> str:
        if len(self.thermal_readings) > 1:
            return self.thermal_readings.pop(0)
        return self.thermal_readings[0]

    def install(self, bundle_id: str, version: str) -> InstalledApp:
        app = self.apps.get(bundle_id)
        if app is None:
            app = InstalledApp(bundle_id, version, self.programs.get(bundle_id))
            app.files.makedirs("Documents")
            self.apps[bundle_id] = app
        app.version = version
        return app

    def operation(self, name: str, subject: str) -> None:
        """Every fake service call passes here: it may be the one where the cable comes out."""
        if not self.plugged:
            raise ConnectionTerminatedError(f"{self.serial}: connection closed during {name}")
        for rule in list(self._unplug_rules):
            rule_op, contains, countdown = rule
            if rule_op == name and contains in subject:
                if countdown[0] == 0:
                    self._unplug_rules.remove(rule)
                    self.plugged = False
                    raise ConnectionTerminatedError(f"{self.serial}: connection closed during {name}")
                countdown[0] -= 1
        self.operations.append((name, subject))

    def launch(self, bundle_id: str, arguments: list[str]) -> int:
        app = self.apps.get(bundle_id)
        if app is None:
            raise AppNotInstalledError(f"No app with bundle ID {bundle_id} is installed.")
        for process in self.processes.values():
            if process.bundle_id == bundle_id:
                process.killed.set()
        self._next_pid += 1
        process = FakeProcess(self._next_pid, bundle_id)
        if app.program is not None:
            process.thread = threading.Thread(
                target=app.program,
                args=(app.files, list(arguments), process),
                name=f"app-{bundle_id}",
                daemon=True,
            )
            process.thread.start()
        self.processes[process.pid] = process
        return process.pid

    def power_source(self) -> dict[str, Any] | None:
        busy = any(p.running for p in self.processes.values())
        entry = self.battery_registry["busy" if busy else "idle"]
        return dict(entry) if entry is not None else None

    def pid_of(self, bundle_id: str) -> int:
        for process in self.processes.values():
            if process.bundle_id == bundle_id and process.running:
                return process.pid
        return 0


class FakeLockdown:
    def __init__(self, phone: FakePhone) -> None:
        self._phone = phone

    async def get_value(self, domain: str | None = None, key: str | None = None) -> Any:
        self._phone.operation("get_value", f"{domain or ''}/{key or ''}")
        if domain == "com.apple.mobile.battery":
            battery = {"BatteryCurrentCapacity": self._phone.battery_pct, "BatteryIsCharging": True}
            return battery if key is None else battery.get(key)
        if domain is not None:
            return None
        return dict(self._phone.lockdown_values) if key is None else self._phone.lockdown_values.get(key)


class FakeInstallationProxy:
    def __init__(self, phone: FakePhone) -> None:
        self._phone = phone

    async def get_apps(
        self,
        application_type: str = "Any",
        calculate_sizes: bool = False,
        bundle_identifiers: list[str] | None = None,
    ) -> dict[str, dict[str, Any]]:
        self._phone.operation("get_apps", ",".join(bundle_identifiers or []))
        return {
            app.bundle_id: {"CFBundleIdentifier": app.bundle_id, "CFBundleVersion": app.version}
            for app in self._phone.apps.values()
            if bundle_identifiers is None or app.bundle_id in bundle_identifiers
        }

    async def install_from_local(self, package_path: Path, cmd: str = "Install") -> None:
        self._phone.operation("install_from_local", f"{cmd}:{package_path.name}")
        try:
            with zipfile.ZipFile(package_path) as archive:
                name = next(
                    n for n in archive.namelist() if n.endswith(".app/Info.plist") and n.count("/") == 2
                )
                info = plistlib.loads(archive.read(name))
        except (OSError, zipfile.BadZipFile, StopIteration) as exc:
            raise AppInstallError(f"PackageInspectionFailed: {exc}") from None
        self._phone.install(str(info["CFBundleIdentifier"]), str(info["CFBundleVersion"]))


class FakeHouseArrest:
    """AFC over one app's container, as `HouseArrestService.create(lockdown, bundle_id)` vends it."""

    def __init__(self, phone: FakePhone, files: AppFiles) -> None:
        self._phone = phone
        self._files = files

    async def exists(self, filename: str) -> bool:
        self._phone.operation("exists", filename)
        await asyncio.sleep(0)
        return self._files.exists(filename)

    async def makedirs(self, filename: str) -> Any:
        self._phone.operation("makedirs", filename)
        self._files.makedirs(filename)
        return b""

    async def listdir(self, filename: str) -> list[str]:
        self._phone.operation("listdir", filename)
        return self._files.listdir(filename)

    async def set_file_contents(self, filename: str, data: bytes) -> None:
        self._phone.operation("set_file_contents", filename)
        await asyncio.sleep(0)
        self._files.write(filename, data)

    async def get_file_contents(self, filename: str) -> bytes:
        self._phone.operation("get_file_contents", filename)
        await asyncio.sleep(0)
        return self._files.read(filename)

    async def rename(self, source: str, target: str) -> None:
        self._phone.operation("rename", source)
        self._files.rename(source, target)

    async def rm(self, filename: str, match: Pattern[str] | None = None, force: bool = False) -> list[str]:
        self._phone.operation("rm", filename)
        if not self._files.exists(filename):
            if force:
                return [filename]
            raise AfcException(f"Failed to delete: {filename}", None)
        self._files.remove_tree(filename)
        return []


class FakeProcessControl:
    def __init__(self, phone: FakePhone) -> None:
        self._phone = phone

    async def launch(
        self, bundle_id: str, arguments: list[str] | None = None, kill_existing: bool = True
    ) -> int:
        self._phone.operation("launch", bundle_id)
        return self._phone.launch(bundle_id, arguments or [])

    async def kill(self, pid: int) -> None:
        self._phone.operation("kill", str(pid))
        process = self._phone.processes.get(pid)
        if process is not None:
            process.killed.set()

    async def process_identifier_for_bundle_identifier(self, app_bundle_identifier: str) -> int:
        self._phone.operation("process_identifier_for_bundle_identifier", app_bundle_identifier)
        return self._phone.pid_of(app_bundle_identifier)


class FakeDiagnostics:
    """The diagnostics relay's IORegistry query, as DiagnosticsService.ioregistry answers it: the
    `IORegistry` dict of the matched entry, `{}` where nothing matches."""

    def __init__(self, phone: FakePhone) -> None:
        self._phone = phone

    async def ioregistry(
        self, plane: str | None = None, name: str | None = None, ioclass: str | None = None
    ) -> dict[str, Any] | None:
        self._phone.operation("ioregistry", ioclass or name or plane or "")
        entry = self._phone.power_source() if ioclass == "IOPMPowerSource" and not name else None
        return entry if entry is not None else {}


class FakeProvider:
    """A `ConnectionProvider` over fake phones; an unplugged phone is gone from usbmux."""

    def __init__(self, *phones: FakePhone) -> None:
        self.phones = {phone.serial: phone for phone in phones}

    async def serials(self) -> list[str]:
        return sorted(serial for serial, phone in self.phones.items() if phone.plugged)

    def _phone(self, serial: str) -> FakePhone:
        phone = self.phones.get(serial)
        if phone is None or not phone.plugged:
            raise NoDeviceConnectedError()
        if phone.pairing_refused:
            raise PasswordRequiredError("the device is locked with a passcode; unlock it and trust this host")
        return phone

    @asynccontextmanager
    async def lockdown(self, serial: str) -> AsyncIterator[Lockdown]:
        yield FakeLockdown(self._phone(serial))

    @asynccontextmanager
    async def installation_proxy(self, serial: str) -> AsyncIterator[InstallationProxy]:
        yield FakeInstallationProxy(self._phone(serial))

    @asynccontextmanager
    async def app_container(self, serial: str, bundle_id: str) -> AsyncIterator[ContainerFiles]:
        phone = self._phone(serial)
        app = phone.apps.get(bundle_id)
        if app is None:
            raise AppNotInstalledError(f"No app with bundle ID {bundle_id} is installed.")
        yield FakeHouseArrest(phone, app.files)

    @asynccontextmanager
    async def process_control(self, serial: str) -> AsyncIterator[ProcessControl]:
        yield FakeProcessControl(self._phone(serial))

    @asynccontextmanager
    async def diagnostics(self, serial: str) -> AsyncIterator[Diagnostics]:
        yield FakeDiagnostics(self._phone(serial))
