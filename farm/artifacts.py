"""Content-addressed files: everything the farm compiles or caches lives under its sha256."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

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
