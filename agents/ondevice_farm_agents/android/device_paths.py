"""Where the farm keeps things on a unit: everything under one root, nothing outside it.

Names that reach the device come from hashes and fixed words; any other value is checked
here, and every path is shell-quoted where a command is built.
"""

from __future__ import annotations

import posixpath
import re
import shlex

from ondevice_farm.errors import DeviceError

DEFAULT_DEVICE_ROOT = "/data/local/tmp/farm"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def q(value: str) -> str:
    """Quote one value for the device's shell."""
    return shlex.quote(value)


class DevicePaths:
    def __init__(self, root: str = DEFAULT_DEVICE_ROOT) -> None:
        clean = posixpath.normpath(root)
        if not clean.startswith("/data/local/tmp/") and not clean.startswith("/sdcard/"):
            raise DeviceError(f"device root {root!r} must be under /data/local/tmp or /sdcard")
        self.root = clean

    def join(self, *parts: str) -> str:
        """`root/part/...`, each part a plain file name (no `/`, no `..`, no shell characters)."""
        for part in parts:
            if not _SAFE_NAME.match(part):
                raise DeviceError(f"refusing device path component {part!r}")
        path = posixpath.normpath(posixpath.join(self.root, *parts))
        if path != self.root and not path.startswith(self.root + "/"):
            raise DeviceError(f"{path} is outside the farm's directory {self.root}")
        return path

    @property
    def cache(self) -> str:
        return self.join("cache")

    @property
    def jobs(self) -> str:
        return self.join("jobs")

    def entry(self, sha256: str) -> str:
        if not re.fullmatch(r"[0-9a-f]{64}", sha256):
            raise DeviceError(f"not a sha256: {sha256!r}")
        return self.join("cache", sha256)

    def job(self, job_id: str) -> str:
        return self.join("jobs", job_id)
