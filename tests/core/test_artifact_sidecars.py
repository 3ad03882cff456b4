"""A compiled artifact's sidecars (files a compile wrote beside it under its name plus a suffix:
ExecuTorch's ETRecord, CoreML's I/O name map) travel with it to a node that lacks the
submitter's files, outside its content hash, and land beside it there."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ondevice_farm.artifacts import ArtifactStore, pack_artifact, sidecar_files, unpack_artifact
from ondevice_farm.errors import DeviceError
from ondevice_farm_agents.runtimes.executorch.profile import etrecord_beside


def _stored_pte(tmp_path: Path) -> tuple[str, Path]:
    built = tmp_path / "built" / "model.pte"
    built.parent.mkdir()
    built.write_bytes(b"a program's bytes")
    sha, path = ArtifactStore(tmp_path / "store").put(built)
    (path.parent / "model.pte.etrecord").write_bytes(b"the compile's record")  # as compile/edge.py does
    (path.parent / "graph_nodes.v1.json").write_text("{}")  # another cache's file: not the artifact's
    return sha, path


def test_the_etrecord_arrives_beside_the_program(tmp_path: Path) -> None:
    sha, path = _stored_pte(tmp_path)
    assert [p.name for p in sidecar_files(path)] == ["model.pte.etrecord"]
    arrived = unpack_artifact(pack_artifact(path, sha), tmp_path / "node-cache")
    assert (arrived.parent / "model.pte.etrecord").read_bytes() == b"the compile's record"
    assert not (arrived.parent / "graph_nodes.v1.json").exists()
    assert etrecord_beside(arrived) == arrived.parent / "model.pte.etrecord"  # where the profile looks


def test_a_sidecar_named_outside_the_artifact_is_refused(tmp_path: Path) -> None:
    sha, path = _stored_pte(tmp_path)
    shipped = dataclasses.replace(pack_artifact(path, sha), sidecars=(("../evil", b"x"),))
    with pytest.raises(DeviceError, match="stray file"):
        unpack_artifact(shipped, tmp_path / "node-cache")
    assert not (tmp_path / "node-cache" / sha / "model.pte").exists()
