"""A directory artifact shipped to another node keeps its empty folders (an .mlpackage's empty
weights folder, which CoreML looks up), and its hash stays that of its files."""

from __future__ import annotations

from pathlib import Path

from ondevice_farm.artifacts import pack_artifact, sha256_path, unpack_artifact


def test_an_empty_weights_folder_arrives(tmp_path: Path) -> None:
    package = tmp_path / "model.mlpackage"
    (package / "Data/com.apple.CoreML/weights").mkdir(parents=True)
    (package / "Data/com.apple.CoreML/model.mlmodel").write_bytes(b"program")
    sha = sha256_path(package)
    arrived = unpack_artifact(pack_artifact(package, sha), tmp_path / "node")
    assert (arrived / "Data/com.apple.CoreML/weights").is_dir()
    assert (arrived / "Data/com.apple.CoreML/model.mlmodel").read_bytes() == b"program"
    assert sha256_path(arrived) == sha
