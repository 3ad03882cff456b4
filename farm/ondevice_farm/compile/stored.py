"""A compiler's output moved into the artifact store with what belongs beside it."""

from __future__ import annotations

import shutil
from pathlib import Path

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.io_names import save_io_names
from ondevice_farm.compile.report import CompiledArtifact


def store_built(
    built: CompiledArtifact, store: ArtifactStore, sidecar_suffixes: tuple[str, ...] = ()
) -> CompiledArtifact:
    """`built.path` (in a scratch folder) into the store under its sha256; beside the stored
    artifact, under the same hash, each `<artifact><suffix>` the compiler wrote and the I/O name
    map."""
    sha, path = store.put(built.path, built.path.name)
    for suffix in sidecar_suffixes:
        sidecar = built.path.with_name(built.path.name + suffix)
        if sidecar.exists():
            shutil.copyfile(sidecar, Path(str(path) + suffix))
    if built.io_names is not None:
        save_io_names(built.io_names, path)
    return CompiledArtifact(
        target=built.target, path=path, sha256=sha, report=built.report, io_names=built.io_names
    )
