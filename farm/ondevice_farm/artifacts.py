"""Content-addressed files: everything the farm compiles or caches lives under its sha256."""

from __future__ import annotations

import glob
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
from ondevice_farm.onnx_external import external_files

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


def sha256_with_external(model_path: Path, files: tuple[str, ...]) -> str:
    """The identity of an ONNX model with external data (`onnx_external`): its own bytes' hash and
    each file's name and hash, so new weights in a `.data` file are a new model to every cache."""
    digest = hashlib.sha256(f"onnx+external\0{sha256_file(model_path)}\0".encode())
    for name in files:
        digest.update(f"{name}\0{sha256_file(model_path.parent / name)}\0".encode())
    return digest.hexdigest()


def sha256_path(path: Path) -> str:
    """A directory's tree hash; an ONNX model's with its external data files; else the file's."""
    if path.is_dir():
        return sha256_tree(path)
    files = external_files(path)
    return sha256_with_external(path, files) if files else sha256_file(path)


def _copy_with_external(source: Path, target: Path) -> None:
    """`source` to `target`, its external data files (if any) to the same places beside it."""
    shutil.copy2(source, target)
    for name in external_files(source):
        (target.parent / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source.parent / name, target.parent / name)


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
                _copy_with_external(source, staged)
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
    (an `.mlpackage`) as one uncompressed tar of its tree, an ONNX model with external data as one
    tar of the model (under `name`) and its data files (`with_external`). `sidecars`: the files a
    compile wrote beside it (`sidecar_files`), by name, written beside it on arrival."""

    name: str
    sha256: str
    is_tree: bool
    data: bytes
    with_external: bool = False
    sidecars: tuple[tuple[str, bytes], ...] = ()

    @property
    def size_bytes(self) -> int:
        return len(self.data)


def tree_size_bytes(path: Path) -> int:
    """A directory's files, or a file and its external data files, in bytes."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size + sum((path.parent / n).stat().st_size for n in external_files(path))


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Only what the content hash covers: the same tree packs to the same bytes on every host."""
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    info.mode = 0o755 if info.isdir() else 0o644
    return info


def write_tree_tar(path: Path, out: BinaryIO) -> None:
    """The directory `path` as one uncompressed tar of its files, the same bytes on every host."""
    # directories come with their files, an empty one on its own (an .mlpackage's empty weights
    # folder, which CoreML looks up); links are not artifacts
    entries = [
        f.relative_to(path).as_posix()
        for f in sorted(path.rglob("*"))
        if f.is_file() or (f.is_dir() and not f.is_symlink() and not any(f.iterdir()))
    ]
    _write_tar(path, entries, out)


def write_model_tar(model: Path, out: BinaryIO, data: tuple[str, ...] | None = None) -> None:
    """An ONNX model and its external data files (`data`, when the caller has read them already)
    as one tar: the model under its own name, each data file at the location the model names, so
    unpacked they load as they did here."""
    data = external_files(model) if data is None else data
    names = [model.name, *(n for n in data if n != model.name)]
    _write_tar(model.parent, names, out)


def _write_tar(root: Path, names: list[str], out: BinaryIO) -> None:
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in names:
            archive.add(root / name, arcname=name, recursive=False, filter=_plain)


def extract_tree_tar(source: BinaryIO, target: Path) -> None:
    """A `write_tree_tar` archive into the new directory `target`; the "data" filter refuses
    absolute paths, `..`, links out of the tree and devices."""
    with tarfile.open(fileobj=source, mode="r:") as archive:
        archive.extractall(target, filter="data")


def sidecar_files(path: Path, data: tuple[str, ...] | None = None) -> list[Path]:
    """Files a compile wrote beside an artifact under its name plus a suffix (`model.pte.etrecord`,
    which names the ops of a per-op profile; `model.mlpackage.io.json`): metadata derived from
    the artifact, so outside its hash, but a node running it needs them beside it too."""
    if data is None:
        data = external_files(path) if path.is_file() else ()
    return sorted(
        p for p in path.parent.glob(f"{glob.escape(path.name)}.*") if p.is_file() and p.name not in data
    )


def pack_artifact(path: Path, sha256: str) -> ShippedArtifact:
    """`path` (a file or a directory) as one `ShippedArtifact`; `sha256` is its `sha256_path`."""
    # the model's proto is parsed once here: a large inline model costs seconds per parse
    data = () if path.is_dir() else external_files(path)
    sidecars = tuple((p.name, p.read_bytes()) for p in sidecar_files(path, data))
    buffer = io.BytesIO()
    if path.is_dir():
        write_tree_tar(path, buffer)
        return ShippedArtifact(path.name, sha256, True, buffer.getvalue(), sidecars=sidecars)
    if not data:
        return ShippedArtifact(path.name, sha256, False, path.read_bytes(), sidecars=sidecars)
    write_model_tar(path, buffer, data)
    return ShippedArtifact(path.name, sha256, True, buffer.getvalue(), with_external=True, sidecars=sidecars)


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
        # a model with external data unpacks beside its files; anything else under its own name
        staged_root = staging / "model" if shipped.with_external else staging
        staged = staged_root / shipped.name
        if shipped.is_tree:
            extract_tree_tar(io.BytesIO(shipped.data), staged_root if shipped.with_external else staged)
        else:
            staged.write_bytes(shipped.data)
        arrived = sha256_path(staged)
        if arrived != shipped.sha256:
            raise DeviceError(
                f"shipped artifact {shipped.name} arrived as {arrived[:12]}, expected {shipped.sha256[:12]}",
                hint=_DAMAGED_HINT,
            )
        if shipped.with_external:
            # the data files first: whoever sees the model in place finds its weights there too
            for name in external_files(staged):
                _move_into_place(staged_root / name, target.parent / name)
        for name, content in shipped.sidecars:
            if Path(name).name != name or not name.startswith(f"{shipped.name}."):
                raise DeviceError(f"shipped artifact {shipped.name} came with a stray file {name!r}")
            (staging / f"sidecar-{name}").write_bytes(content)
            _move_into_place(staging / f"sidecar-{name}", target.parent / name)
        _move_into_place(staged, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _move_into_place(staged: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(staged, target)
    except OSError:
        if not target.exists():  # an equal artifact unpacked by another job won the race
            raise
