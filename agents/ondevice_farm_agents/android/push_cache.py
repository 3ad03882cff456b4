"""Content-addressed files on the unit: `<root>/cache/<sha256>/<name>`, pushed once.

An entry counts only once its `complete` marker exists, and the marker is written only
after the device itself hashed the pushed bytes and they matched; a push cut short leaves
an entry without a marker, which is removed before the next use. Markers' mtimes record
last use, so the oldest entries go first when the cache is over its size limit.

A folder (an ONNX Runtime GenAI model: genai_config.json, the ONNX file and its external data, the
tokenizer) is one entry under its tree's hash (`ondevice_farm.artifacts.sha256_tree`), the files at
their relative paths in `<sha256>/<name>/`: they must sit together, since genai_config.json names
its files relative to itself. It is pushed into `<name>.part/`, every file hashed on the device,
and renamed and marked complete only when all of them match.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ondevice_farm.artifacts import sha256_file
from ondevice_farm.errors import DeviceError
from ondevice_farm_agents.android.device_paths import DevicePaths, q
from ondevice_farm_agents.android.transport import AdbConnection

DEFAULT_CACHE_LIMIT_BYTES = 2 * 1024**3
MARKER = "complete"


@dataclass(frozen=True)
class CachedFile:
    local: Path
    name: str
    sha256: str
    size: int


@dataclass(frozen=True)
class CachedFolder:
    local: Path
    name: str
    #: the tree's hash: relative paths and file hashes, as `sha256_tree` computes it
    sha256: str
    #: every file, `name` its path relative to the folder (with `/`), in sorted order
    files: tuple[CachedFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


Cached = CachedFile | CachedFolder


def describe(local: Path, name: str | None = None, sha256: str | None = None) -> CachedFile:
    """A local file as the cache sees it; `sha256` is trusted when the caller has it already."""
    digest = sha256 or sha256_file(local)
    return CachedFile(local, name or local.name, digest, local.stat().st_size)


def describe_folder(local: Path, name: str | None = None) -> CachedFolder:
    """A local folder as the cache sees it: each file hashed, the tree's hash made from those (the
    same digest as `sha256_tree`, so the entry is the one the artifact store names)."""
    files = [describe(p, p.relative_to(local).as_posix()) for p in sorted(local.rglob("*")) if p.is_file()]
    if not files:
        raise DeviceError(f"{local} holds no files to push")
    return folder_of(local, files, name or local.name)


def folder_of(local: Path, files: Sequence[CachedFile], name: str) -> CachedFolder:
    """Files that must sit together on the unit (each `name` its path in the folder) as one entry,
    hashed as `sha256_tree` hashes a folder of them."""
    ordered = sorted(files, key=lambda f: f.name)
    tree = hashlib.sha256()
    for item in ordered:
        tree.update(item.name.encode() + b"\0" + item.sha256.encode())
    return CachedFolder(local, name, tree.hexdigest(), tuple(ordered))


class PushCache:
    def __init__(
        self, conn: AdbConnection, paths: DevicePaths, limit_bytes: int = DEFAULT_CACHE_LIMIT_BYTES
    ) -> None:
        self.conn = conn
        self.paths = paths
        self.limit_bytes = limit_bytes

    def device_path(self, item: Cached) -> str:
        """A file's path, or a folder's directory, on the unit."""
        return f"{self.paths.entry(item.sha256)}/{self.paths.join(item.name).rsplit('/', 1)[1]}"

    def _file_paths(self, item: Cached, top: str | None = None) -> list[tuple[str, CachedFile]]:
        """(device path, file) of each file an item holds; a folder's under `top` (default: its
        directory), each relative path's parts checked as any name reaching the device is."""
        if isinstance(item, CachedFile):
            return [(self.device_path(item), item)]
        top = top or self.device_path(item)
        paths = []
        for file in item.files:
            parts = file.name.split("/")
            self.paths.join(*parts)  # refuses `..`, shell characters, absolute paths
            paths.append((f"{top}/{'/'.join(parts)}", file))
        return paths

    def ensure(self, items: Sequence[Cached]) -> list[str]:
        """Each item's device path, pushing those not already there and intact. Returns paths."""
        self._remove_incomplete()
        present = self._intact({i.sha256: i for i in items})
        for item in items:
            if item.sha256 not in present:
                if isinstance(item, CachedFolder):
                    self._push_folder(item)
                else:
                    self._push(item)
        self._touch([i for i in items if i.sha256 in present])
        self.evict(keep={i.sha256 for i in items})
        return [self.device_path(i) for i in items]

    def _intact(self, wanted: dict[str, Cached]) -> set[str]:
        """The entries that are complete and whose every file the device hashes as expected."""
        if not wanted:
            return set()
        expected = {sha: dict(self._file_paths(item)) for sha, item in wanted.items()}
        checks = " ".join(
            f"[ -f {q(self.paths.entry(sha))}/{MARKER} ] && sha256sum {' '.join(q(p) for p in files)};"
            for sha, files in expected.items()
        )
        result = self.conn.shell(f"{checks} true")
        matched: set[str] = set()
        for line in result.output.splitlines():
            digest, _, path = line.strip().partition("  ")
            matched.update(
                path for files in expected.values() if path in files and files[path].sha256 == digest
            )
        return {sha for sha, files in expected.items() if set(files) <= matched}

    def _push(self, item: CachedFile) -> None:
        entry = self.paths.entry(item.sha256)
        target = self.device_path(item)
        partial = f"{target}.part"
        prep = self.conn.shell(f"rm -rf {q(entry)} && mkdir -p {q(entry)}")
        if not prep.ok:
            raise DeviceError(f"{self.conn.serial}: cannot create {entry}: {prep.output.strip()}")
        self.conn.push(item.local, partial)
        check = self.conn.shell(f"stat -c %s {q(partial)} && sha256sum {q(partial)}")
        lines = check.output.split()
        if not check.ok or len(lines) < 2 or lines[0] != str(item.size) or lines[1] != item.sha256:
            self.conn.shell(f"rm -rf {q(entry)}")
            raise DeviceError(
                f"{self.conn.serial}: {item.name} arrived damaged (size/sha256 {lines[:2]} != "
                f"{item.size} {item.sha256[:12]}...)"
            )
        done = self.conn.shell(f"mv {q(partial)} {q(target)} && touch {q(entry)}/{MARKER}")
        if not done.ok:
            raise DeviceError(f"{self.conn.serial}: cannot complete {entry}: {done.output.strip()}")

    def _push_folder(self, item: CachedFolder) -> None:
        """Every file into `<name>.part/`, all checked on the device in one call, then renamed."""
        entry = self.paths.entry(item.sha256)
        target = self.device_path(item)
        partial = f"{target}.part"
        files = self._file_paths(item, partial)
        directories = sorted({path.rsplit("/", 1)[0] for path, _ in files})
        prep = self.conn.shell(f"rm -rf {q(entry)} && mkdir -p {' '.join(q(d) for d in directories)}")
        if not prep.ok:
            raise DeviceError(f"{self.conn.serial}: cannot create {entry}: {prep.output.strip()}")
        for path, file in files:
            self.conn.push(file.local, path)
        check = self.conn.shell(
            " ".join(f'echo "$(stat -c %s {q(p)}) $(sha256sum {q(p)})";' for p, _ in files) + " true"
        )
        arrived = {}
        for line in check.output.splitlines():
            size, digest, path = [*line.split(maxsplit=2), "", "", ""][:3]
            arrived[path.strip()] = (size, digest)
        damaged = [f.name for p, f in files if arrived.get(p) != (str(f.size), f.sha256)]
        if damaged:
            self.conn.shell(f"rm -rf {q(entry)}")
            raise DeviceError(
                f"{self.conn.serial}: {item.name}/{damaged[0]} arrived damaged "
                f"({len(damaged)} of {len(files)} files differ in size or sha256)"
            )
        done = self.conn.shell(f"mv {q(partial)} {q(target)} && touch {q(entry)}/{MARKER}")
        if not done.ok:
            raise DeviceError(f"{self.conn.serial}: cannot complete {entry}: {done.output.strip()}")

    def _touch(self, items: Sequence[Cached]) -> None:
        if items:
            self.conn.shell(
                " ".join(f"touch {q(self.paths.entry(i.sha256))}/{MARKER};" for i in items) + " true"
            )

    def _remove_incomplete(self) -> None:
        cache = q(self.paths.cache)
        self.conn.shell(
            f'mkdir -p {cache} && for d in {cache}/*/; do [ -d "$d" ] && [ ! -f "${{d}}{MARKER}" ] '
            f'&& rm -rf "$d"; done; true'
        )

    def entries(self) -> list[tuple[str, int, int]]:
        """(sha256, bytes, last-use epoch seconds) of each complete entry."""
        cache = q(self.paths.cache)
        listing = self.conn.shell(
            f'for d in {cache}/*/; do [ -f "${{d}}{MARKER}" ] || continue; '
            f'echo "$(basename "$d") $(stat -c %Y "${{d}}{MARKER}") $(du -sk "$d" | cut -f1)"; done; true'
        )
        rows = []
        for line in listing.output.splitlines():
            parts = line.split()
            if len(parts) == 3 and all(p.isdigit() for p in parts[1:]):
                rows.append((parts[0], int(parts[2]) * 1024, int(parts[1])))
        return rows

    def evict(self, keep: set[str]) -> list[str]:
        """Remove least recently used entries (never those in `keep`) until under the limit."""
        rows = sorted(self.entries(), key=lambda r: r[2])
        total = sum(r[1] for r in rows)
        removed = []
        for sha, size, _ in rows:
            if total <= self.limit_bytes:
                break
            if sha in keep:
                continue
            self.conn.shell(f"rm -rf {q(self.paths.entry(sha))}")
            removed.append(sha)
            total -= size
        return removed
