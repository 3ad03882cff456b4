"""A real `farm serve --gc-every` collects on its schedule while it serves, and says so."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ondevice_farm.artifacts import ArtifactStore
from tests.compare.conftest import matmul_chain
from tests.fleet.conftest import only_loopback
from tests.fleet.serve import farm_serve

pytestmark = pytest.mark.slow


def test_serve_collects_on_its_schedule(tmp_path: Path) -> None:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    farm_home = tmp_path / "farm"
    _, path = ArtifactStore(farm_home / "artifacts").put(
        matmul_chain(tmp_path / "m.onnx", 1, width=8), "model.onnx"
    )
    old = time.time() - 90 * 86400
    os.utime(path, (old, old))
    os.utime(path.parent, (old, old))
    with farm_serve(tmp_path, farm_home, "--gc-every", "2s", "--gc-keep-days", "30") as serving:
        assert serving.process.stderr is not None
        deadline = time.monotonic() + 60
        said = ""
        while time.monotonic() < deadline and "gc: " not in said:
            said = serving.process.stderr.readline()
        assert said.startswith("gc: removed 0 run(s) and 1 cache entry"), said
        assert not path.parent.exists()
        assert serving.process.poll() is None  # still serving
