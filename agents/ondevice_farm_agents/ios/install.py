"""FarmRunner on the phone: installed once, upgraded when the package's version changes."""

from __future__ import annotations

import plistlib
import zipfile
from pathlib import Path
from typing import Any

from ondevice_farm.errors import DeviceError, UsageError
from ondevice_farm_agents.ios.link import DeviceLink

#: installing a signed app takes a while on the phone (verification, registration)
DEFAULT_INSTALL_TIMEOUT_S = 300.0


def package_version(package: Path) -> str:
    """`CFBundleVersion` of an `.ipa` (zip with Payload/<name>.app) or an unpacked `.app` directory."""
    try:
        if package.is_dir():
            info = plistlib.loads((package / "Info.plist").read_bytes())
        else:
            with zipfile.ZipFile(package) as archive:
                names = [n for n in archive.namelist() if n.count("/") == 2 and n.endswith(".app/Info.plist")]
                if not names:
                    raise UsageError(f"{package}: no Payload/<name>.app/Info.plist inside")
                info = plistlib.loads(archive.read(names[0]))
    except (OSError, zipfile.BadZipFile, plistlib.InvalidFileException) as exc:
        raise UsageError(f"{package}: not a readable .ipa or .app ({exc})") from None
    return str(info.get("CFBundleVersion", ""))


def installed_version(link: DeviceLink, bundle_id: str) -> str | None:
    """The installed app's `CFBundleVersion`, or None when it is not installed."""

    async def lookup() -> dict[str, dict[str, Any]]:
        async with link.provider.installation_proxy(link.serial) as proxy:
            return await proxy.get_apps(application_type="User", bundle_identifiers=[bundle_id])

    apps = link.call(lookup(), f"looking up {bundle_id}")
    app = apps.get(bundle_id)
    return None if app is None else str(app.get("CFBundleVersion", ""))


def ensure_installed(link: DeviceLink, bundle_id: str, package: Path | None) -> str:
    """Install or upgrade the runner when needed; returns what was done: `kept`, `installed`, `upgraded`."""
    current = installed_version(link, bundle_id)
    if package is None:
        if current is None:
            raise DeviceError(
                f"{link.serial}: {bundle_id} is not installed and no app package was given",
                hint="set ios_app_package to the FarmRunner .ipa (docs/ios-runner.md builds one)",
            )
        return "kept"
    wanted = package_version(package)
    if current == wanted:
        return "kept"
    command = "Install" if current is None else "Upgrade"

    async def install() -> None:
        async with link.provider.installation_proxy(link.serial) as proxy:
            await proxy.install_from_local(package, command)

    link.call(install(), f"installing {package.name}", timeout_s=DEFAULT_INSTALL_TIMEOUT_S)
    return "installed" if current is None else "upgraded"
