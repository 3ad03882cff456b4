"""Content-addressed files: everything the farm compiles or caches lives under its sha256."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ondevice_farm.errors import DeviceError

CHUNK_BYTES = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_tree(path: Path) -> str:
    """A directory's hash (e.g. an .mlpackage): relative paths and contents, in sorted order."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode())
        digest.update(b"\0")
        digest.update(sha256_file(file).encode())
    return digest.hexdigest()


def sha256_path(path: Path) -> str:
    return sha256_tree(path) if path.is_dir() else sha256_file(path)


class ArtifactStore:
    """`root/<sha[:2]>/<sha>/<name>`: written to a temp dir, then renamed, so a reader never
    sees half a file and two writers of the same content agree."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, sha256: str, name: str) -> Path:
        return self.root / sha256[:2] / sha256 / name

    def put(self, source: Path, name: str | None = None) -> tuple[str, Path]:
        sha = sha256_path(source)
        target = self.path_for(sha, name or source.name)
        if target.exists():
            return sha, target
        target.parent.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent.parent))
        try:
            staged = staging / target.name
            if source.is_dir():
                shutil.copytree(source, staged)
            else:
                shutil.copy2(source, staged)
            try:
                if target.parent.exists():  # same content stored under another name
                    os.rename(staged, target)
                else:
                    os.rename(staging, target.parent)
            except OSError:
                if not target.exists():  # lost a race to an equal writer: theirs is as good
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return sha, target


#: said with a shipped artifact whose content does not match its hash
_DAMAGED_HINT = "the artifact was damaged on the way; resubmit (the agent host keeps no partial copy)"


@dataclass(frozen=True)
class ShippedArtifact:
    """An artifact's bytes for a node without the submitter's files: a file as it is, a directory
    (an `.mlpackage`) as one uncompressed tar of its tree."""

    name: str
    sha256: str
    is_tree: bool
    data: bytes

    @property
    def size_bytes(self) -> int:
        return len(self.data)


def tree_size_bytes(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Only what the content hash covers: the same tree packs to the same bytes on every host."""
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    info.mode = 0o644
    return info


def write_tree_tar(path: Path, out: BinaryIO) -> None:
    """The directory `path` as one uncompressed tar of its files, the same bytes on every host."""
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for file in sorted(path.rglob("*")):
            if file.is_file():  # directories come with their files; links are not artifacts
                archive.add(file, arcname=file.relative_to(path).as_posix(), recursive=False, filter=_plain)


def extract_tree_tar(source: BinaryIO, target: Path) -> None:
    """A `write_tree_tar` archive into the new directory `target`; the "data" filter refuses
    absolute paths, `..`, links out of the tree and devices."""
    with tarfile.open(fileobj=source, mode="r:") as archive:
        archive.extractall(target, filter="data")


def pack_artifact(path: Path, sha256: str) -> ShippedArtifact:
    """`path` (a file or a directory) as one `ShippedArtifact`; `sha256` is its `sha256_path`."""
    if not path.is_dir():
        return ShippedArtifact(path.name, sha256, False, path.read_bytes())
    buffer = io.BytesIO()
    write_tree_tar(path, buffer)
    return ShippedArtifact(path.name, sha256, True, buffer.getvalue())


def unpack_artifact(shipped: ShippedArtifact, cache_dir: Path) -> Path:
    """The artifact at `cache_dir/<sha256>/<name>`, unpacked and checked against its sha256 first.

    Written under a partial name and renamed into place only once its hash matches, so a cached
    artifact is whole and is never fetched again.
    """
    target = cache_dir / shipped.sha256 / shipped.name
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".arriving-", dir=target.parent))
    try:
        staged = staging / shipped.name
        if shipped.is_tree:
            extract_tree_tar(io.BytesIO(shipped.data), staged)
        else:
            staged.write_bytes(shipped.data)
        arrived = sha256_path(staged)
        if arrived != shipped.sha256:
            raise DeviceError(
                f"shipped artifact {shipped.name} arrived as {arrived[:12]}, expected {shipped.sha256[:12]}",
                hint=_DAMAGED_HINT,
            )
        try:
            os.rename(staged, target)
        except OSError:
            if not target.exists():  # an equal artifact unpacked by another job won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
