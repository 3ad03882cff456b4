"""Files in FarmRunner's container, reached over house_arrest (AFC).

Layout, relative to the container root (the app's home directory):

    Documents/farm/models/<sha256>/<artifact>     a model, pushed once per content hash
    Documents/farm/inputs/<digest>/<i>.bin        a job's input tensors, pushed once per digest
    Documents/farm/jobs/<job_id>/job.json         one job; the app adds outputs/ and result.json

Pushes go to `<name>.partial` and are renamed into place only when complete, so a phone
unplugged mid-push never leaves something that looks cached.
"""

from __future__ import annotations

import posixpath
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from ondevice_farm_agents.ios.link import DeviceLink
from ondevice_farm_agents.ios.provider import ContainerFiles

ROOT = "Documents/farm"
MODELS_DIR = f"{ROOT}/models"
INPUTS_DIR = f"{ROOT}/inputs"
JOBS_DIR = f"{ROOT}/jobs"
#: slowest transfer rate allowed for before a push counts as stalled
MIN_PUSH_BYTES_PER_S = 2_000_000


class AppContainer:
    """Push, read and clean up files in one app's container on one phone."""

    def __init__(self, link: DeviceLink, bundle_id: str) -> None:
        self._link = link
        self._bundle_id = bundle_id

    def push_cached(
        self, files: dict[str, bytes | Path], remote_dir: str, empty_dirs: list[str] | None = None
    ) -> bool:
        """Store `files` (relative path -> bytes or local file) and `empty_dirs` (relative paths)
        under `remote_dir` unless it is there.

        Returns True when it pushed, False when `remote_dir` was already complete.
        """
        size = sum(len(d) if isinstance(d, bytes) else d.stat().st_size for d in files.values())

        async def push() -> bool:
            async with self._open() as afc:
                if await afc.exists(remote_dir):
                    return False
                partial = f"{remote_dir}.partial"
                if await afc.exists(partial):
                    await afc.rm(partial, force=True)
                made: set[str] = set()
                for relative, data in sorted(files.items()):
                    remote = f"{partial}/{relative}"
                    parent = posixpath.dirname(remote)
                    if parent not in made:
                        await afc.makedirs(parent)
                        made.add(parent)
                    await afc.set_file_contents(
                        remote, data if isinstance(data, bytes) else data.read_bytes()
                    )
                for relative in empty_dirs or []:
                    await afc.makedirs(f"{partial}/{relative}")
                await afc.rename(partial, remote_dir)
                return True

        timeout_s = self._link.io_timeout_s + size / MIN_PUSH_BYTES_PER_S
        return self._link.call(push(), f"pushing {remote_dir}", timeout_s=timeout_s)

    def write(self, remote: str, data: bytes) -> None:
        async def write() -> None:
            async with self._open() as afc:
                await afc.makedirs(posixpath.dirname(remote))
                await afc.set_file_contents(remote, data)

        self._link.call(write(), f"writing {remote}")

    def read_all(self, remotes: list[str], total_bytes: int) -> list[bytes]:
        async def read() -> list[bytes]:
            async with self._open() as afc:
                return [await afc.get_file_contents(remote) for remote in remotes]

        timeout_s = self._link.io_timeout_s + total_bytes / MIN_PUSH_BYTES_PER_S
        return self._link.call(read(), "pulling outputs", timeout_s=timeout_s)

    def remove(self, remote: str) -> None:
        async def remove() -> None:
            async with self._open() as afc:
                if await afc.exists(remote):
                    await afc.rm(remote, force=True)

        self._link.call(remove(), f"removing {remote}")

    def _open(self) -> AbstractAsyncContextManager[ContainerFiles]:
        return self._link.provider.app_container(self._link.serial, self._bundle_id)


def artifact_files(artifact: Path) -> dict[str, Path]:
    """Relative path -> local file for a model file or a model directory (`.mlpackage`, `.mlmodelc`)."""
    if artifact.is_dir():
        return {
            f"{artifact.name}/{path.relative_to(artifact).as_posix()}": path
            for path in sorted(artifact.rglob("*"))
            if path.is_file()
        }
    return {artifact.name: artifact}


def artifact_empty_dirs(artifact: Path) -> list[str]:
    """Relative paths of a model directory's empty folders: an `.mlpackage` whose weights all fit in
    its program keeps an empty `Data/com.apple.CoreML/weights`, which its manifest names and
    CoreML looks up, so a copy without it cannot be read."""
    if not artifact.is_dir():
        return []
    return [
        f"{artifact.name}/{path.relative_to(artifact).as_posix()}"
        for path in sorted(artifact.rglob("*"))
        if path.is_dir() and not any(path.iterdir())
    ]
