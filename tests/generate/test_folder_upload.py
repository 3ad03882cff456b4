"""A model folder over the submit API: one tar of its tree, kept only whole and matching its hash,
unpacked on the controller into a folder equal to the submitter's (tree hash); what cannot be
unpacked is refused in one line and leaves nothing behind."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from ondevice_farm.api.blobs import BlobStore
from ondevice_farm.api.wire import FileRef
from ondevice_farm.artifacts import sha256_tree, write_tree_tar
from ondevice_farm.errors import UsageError


def _folder(root: Path) -> Path:
    folder = root / "model-dir"
    (folder / "sub").mkdir(parents=True)
    (folder / "genai_config.json").write_text('{"model": {}}')
    (folder / "model.onnx.data").write_bytes(bytes(range(256)) * 4096)
    (folder / "sub" / "tokenizer.json").write_text("{}")
    return folder


def _tar(folder: Path) -> bytes:
    buffer = io.BytesIO()
    write_tree_tar(folder, buffer)
    return buffer.getvalue()


def test_a_folder_arrives_equal_to_the_one_sent(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    data = _tar(folder)
    assert data == _tar(folder)  # the same tree packs to the same bytes: uploaded once
    sha = hashlib.sha256(data).hexdigest()
    store = BlobStore(tmp_path / "blobs")
    store.put(sha, io.BytesIO(data), len(data))
    arrived = store.path(sha, folder.name, tree=True)
    assert arrived.is_dir() and arrived.name == folder.name
    assert sha256_tree(arrived) == sha256_tree(folder)
    assert store.path(sha, folder.name, tree=True) == arrived  # unpacked once
    assert not [p for p in arrived.parent.iterdir() if p.name.startswith(".unpacking-")]


def test_a_truncated_upload_is_not_kept(tmp_path: Path) -> None:
    data = _tar(_folder(tmp_path))
    sha = hashlib.sha256(data).hexdigest()
    store = BlobStore(tmp_path / "blobs")
    with pytest.raises(UsageError, match="upload ended"):
        store.put(sha, io.BytesIO(data[: len(data) // 2]), len(data))
    assert not store.has(sha)
    with pytest.raises(UsageError, match="not uploaded"):
        store.path(sha, "model-dir", tree=True)


def test_a_tar_that_escapes_its_folder_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"hi"))
    data = buffer.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    store = BlobStore(tmp_path / "blobs")
    store.put(sha, io.BytesIO(data), len(data))
    with pytest.raises(UsageError, match="not a readable tar"):
        store.path(sha, "evil", tree=True)
    assert not (tmp_path / "blobs" / sha / "evil").exists()
    assert not list((tmp_path / "blobs").rglob("escaped.txt"))


def test_the_tree_flag_crosses_the_wire() -> None:
    ref = FileRef("model-dir", "0" * 64, tree=True)
    assert FileRef.from_json(ref.to_json()) == ref
    assert FileRef.from_json(FileRef("m.onnx", "0" * 64).to_json()).tree is False
