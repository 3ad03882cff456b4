"""The controller's uploaded files, by content hash: a model submitted again is not sent again.

`<root>/<sha256>/blob` holds the bytes; `<root>/<sha256>/<name>` is a link to it under the name a
submitter gave it, since a model's name is its file's stem and a checkpoint is known by its suffix.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Protocol

from ondevice_farm.artifacts import extract_tree_tar
from ondevice_farm.errors import UsageError

#: the largest file a submitter may upload (an ONNX protobuf stops at 2 GiB; a checkpoint may be more)
MAX_UPLOAD_BYTES = 8 * 1024**3
CHUNK_BYTES = 1024 * 1024


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class BlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _blob(self, sha256: str) -> Path:
        return self.root / sha256 / "blob"

    def has(self, sha256: str) -> bool:
        return self._blob(sha256).is_file()

    def put(self, sha256: str, body: Readable, length: int) -> None:
        """Read `length` bytes of `body`; kept only if they hash to `sha256` (UsageError if not)."""
        if length > MAX_UPLOAD_BYTES:
            raise UsageError(f"{length} bytes is over the controller's upload limit of {MAX_UPLOAD_BYTES}")
        if self.has(sha256):
            _drain(body, length)
            return
        self.root.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        fd, partial = tempfile.mkstemp(dir=self.root, prefix=".upload-")
        try:
            with os.fdopen(fd, "wb") as out:
                left = length
                while left:
                    chunk = body.read(min(CHUNK_BYTES, left))
                    if not chunk:
                        raise UsageError(f"the upload ended after {length - left} of {length} bytes")
                    digest.update(chunk)
                    out.write(chunk)
                    left -= len(chunk)
            if digest.hexdigest() != sha256:
                raise UsageError(f"the uploaded bytes hash to {digest.hexdigest()}, not {sha256}")
            self._blob(sha256).parent.mkdir(exist_ok=True)
            os.replace(partial, self._blob(sha256))
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)

    def path(self, sha256: str, name: str, *, tree: bool = False) -> Path:
        """The blob under `name` (UsageError if it was never uploaded); a `tree` blob (a folder's
        tar) unpacked into the directory `name`, staged and renamed into place whole."""
        blob = self._blob(sha256)
        if not blob.is_file():
            raise UsageError(f"{name} ({sha256[:12]}) was not uploaded to the controller first")
        if tree:
            return self._unpacked(blob, name)
        named = blob.parent / name
        if not named.exists():
            try:
                os.link(blob, named)
            except FileExistsError:  # another submission linked it first
                pass
            except OSError:  # a filesystem without hard links
                shutil.copyfile(blob, named)
        return named

    def _unpacked(self, blob: Path, name: str) -> Path:
        target = blob.parent / name
        if target.is_dir():
            return target
        staging = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=blob.parent))
        try:
            try:
                with blob.open("rb") as archive:
                    extract_tree_tar(archive, staging / name)
            except (tarfile.TarError, OSError) as exc:
                raise UsageError(f"{name}: the uploaded folder is not a readable tar ({exc})") from None
            try:
                os.rename(staging / name, target)
            except OSError:
                if not target.is_dir():  # another submission unpacked the same folder first
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return target


def _drain(body: Readable, length: int) -> None:
    while length > 0:
        chunk = body.read(min(CHUNK_BYTES, length))
        if not chunk:
            return
        length -= len(chunk)
