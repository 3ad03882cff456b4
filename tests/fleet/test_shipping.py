"""Artifacts for nodes without the submitter's files: a file or a directory tree as one archive,
unpacked into the agent host's cache only once its content hash matches."""

from __future__ import annotations

import dataclasses
import io
import tarfile
from pathlib import Path

import pytest

from ondevice_farm.artifacts import pack_artifact, sha256_path, unpack_artifact
from ondevice_farm.errors import DeviceError


def package(root: Path) -> Path:
    tree = root / "model.mlpackage"
    (tree / "Data" / "com.apple.CoreML" / "weights").mkdir(parents=True)
    (tree / "Manifest.json").write_text('{"fileFormatVersion": "1.0.0"}')
    (tree / "Data" / "com.apple.CoreML" / "model.mlmodel").write_bytes(b"\x08\x09program")
    (tree / "Data" / "com.apple.CoreML" / "weights" / "weight.bin").write_bytes(bytes(range(256)) * 64)
    return tree


def test_a_directory_artifact_arrives_whole_under_its_hash(tmp_path: Path) -> None:
    tree = package(tmp_path / "head")
    sha = sha256_path(tree)
    shipped = pack_artifact(tree, sha)
    assert shipped.is_tree and shipped.name == "model.mlpackage"

    arrived = unpack_artifact(shipped, tmp_path / "agent-cache")

    assert arrived == tmp_path / "agent-cache" / sha / "model.mlpackage"
    assert sha256_path(arrived) == sha
    assert (arrived / "Data/com.apple.CoreML/weights/weight.bin").read_bytes() == bytes(range(256)) * 64
    # cached: a second arrival of the same content is not unpacked again
    again = unpack_artifact(dataclasses.replace(shipped, data=b"not even a tar"), tmp_path / "agent-cache")
    assert again == arrived


def test_the_archive_is_the_same_bytes_for_the_same_tree(tmp_path: Path) -> None:
    one, two = package(tmp_path / "a"), package(tmp_path / "b")
    assert pack_artifact(one, "x").data == pack_artifact(two, "x").data


def test_a_damaged_tree_is_refused_and_leaves_nothing_cached(tmp_path: Path) -> None:
    tree = package(tmp_path / "head")
    shipped = pack_artifact(tree, sha256_path(tree))
    (tree / "Manifest.json").write_text("{}")  # what arrives differs from what was hashed
    damaged = pack_artifact(tree, shipped.sha256)

    with pytest.raises(DeviceError, match="arrived as"):
        unpack_artifact(damaged, tmp_path / "cache")
    assert list((tmp_path / "cache" / shipped.sha256).iterdir()) == []


def test_an_archive_that_climbs_out_of_the_cache_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("../../escaped")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"hi"))
    shipped = pack_artifact(package(tmp_path / "head"), "0" * 64)
    with pytest.raises(tarfile.TarError):
        unpack_artifact(dataclasses.replace(shipped, data=buffer.getvalue()), tmp_path / "cache")
    assert not (tmp_path / "escaped").exists()


def test_a_file_artifact_ships_as_its_bytes(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"onnx bytes")
    shipped = pack_artifact(model, sha256_path(model))
    assert not shipped.is_tree and shipped.data == b"onnx bytes"
    assert unpack_artifact(shipped, tmp_path / "cache").read_bytes() == b"onnx bytes"
