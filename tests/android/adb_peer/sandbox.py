"""The peer's filesystem and shell: device paths live under one host directory.

`/data/local/tmp/x` on the "device" is `<root>/data/local/tmp/x` here. Shell commands run
through `/bin/sh` with those prefixes rewritten, `getprop` (and `dumpsys`, where the
identity has recorded output for it) on PATH, and output mapped back to device paths.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shlex
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

#: device directories that exist in the sandbox; commands may name paths under these. The power
#: supplies and devfreq devices are the sandbox's own (empty unless a test scripts them), never the
#: host's.
MAPPED_PREFIXES = ("/data/local/tmp", "/sdcard", "/sys/class/power_supply", "/sys/class/devfreq")


@dataclass(frozen=True)
class Identity:
    """What the peer says it is: `getprop` properties, and recorded `dumpsys` output by service."""

    properties: dict[str, str]
    dumpsys: dict[str, str] = field(default_factory=dict)

    def banner(self, features: tuple[str, ...] = ("cmd",)) -> bytes:
        props = ";".join(
            f"{key}={self.properties.get(key, '')}"
            for key in ("ro.product.name", "ro.product.model", "ro.product.device")
        )
        return f"device::{props};features={','.join(features)}".encode()


class Sandbox:
    def __init__(self, root: Path, identity: Identity, path_prepend: tuple[str, ...] = ()) -> None:
        self.root = root.resolve()
        self.identity = identity
        self._bin = self.root / "system" / "bin"
        for prefix in MAPPED_PREFIXES:
            (self.root / prefix.lstrip("/")).mkdir(parents=True, exist_ok=True)
        self._bin.mkdir(parents=True, exist_ok=True)
        self._write_tools()
        self._path = os.pathsep.join([str(self._bin), *path_prepend, "/usr/bin", "/bin"])
        self._processes: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()

    def host_path(self, device_path: str) -> Path:
        """A device path -> where it lives here; refuses paths outside the mapped prefixes."""
        clean = posixpath.normpath(device_path)
        if not any(clean == p or clean.startswith(p + "/") for p in MAPPED_PREFIXES):
            raise PermissionError(f"{device_path}: Permission denied")
        return self.root / clean.lstrip("/")

    def to_host_command(self, command: str) -> str:
        for prefix in MAPPED_PREFIXES:
            command = command.replace(prefix, str(self.root) + prefix)
        return command

    def to_device_text(self, data: bytes) -> bytes:
        return data.replace(str(self.root).encode(), b"")

    def spawn(self, command: str, merge_stderr: bool = True) -> subprocess.Popen[bytes]:
        env = {"PATH": self._path, "HOME": str(self.root / "data/local/tmp"), "LANG": "C.UTF-8"}
        proc = subprocess.Popen(
            ["/bin/sh", "-c", self.to_host_command(command)],
            cwd=self.root / "data/local/tmp",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        with self._lock:
            self._processes.append(proc)
        return proc

    def session_ids(self) -> set[int]:
        """Every command runs in a session of its own, its background jobs with it."""
        with self._lock:
            return {proc.pid for proc in self._processes}

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()

    def kill_all(self) -> None:
        with self._lock:
            procs, self._processes = self._processes, []
        for proc in procs:
            # Background jobs a command left behind share its process group: end them too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            self.kill(proc)

    def _write_tools(self) -> None:
        props = self.identity.properties
        cases = "\n".join(
            f"  {shlex.quote(k)}) printf '%s\\n' {shlex.quote(v)} ;;" for k, v in sorted(props.items())
        )
        listing = "\n".join(f"[{k}]: [{v}]" for k, v in sorted(props.items()))
        (self.root / "system" / "getprop.list").write_text(listing + "\n")
        listing_path = shlex.quote(str(self.root / "system" / "getprop.list"))
        getprop = (
            "#!/bin/sh\n"
            f"if [ $# -eq 0 ]; then cat {listing_path}; exit 0; fi\n"
            f'case "$1" in\n{cases}\n  *) echo ;;\nesac\n'
        )
        self._install("getprop", getprop)
        if self.identity.dumpsys:
            records = self.root / "system" / "dumpsys"
            records.mkdir(exist_ok=True)
            lines = []
            for service, text in self.identity.dumpsys.items():
                (records / service).write_text(text)
                lines.append(f"  {shlex.quote(service)}) cat {shlex.quote(str(records / service))} ;;")
            body = "\n".join(lines)
            dumpsys = (
                f'#!/bin/sh\ncase "$1" in\n{body}\n  *) echo "Can\'t find service: $1"; exit 1 ;;\nesac\n'
            )
            self._install("dumpsys", dumpsys)

    def _install(self, name: str, script: str) -> None:
        path = self._bin / name
        path.write_text(script)
        path.chmod(0o755)
