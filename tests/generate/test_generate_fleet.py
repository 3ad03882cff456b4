"""A generation job sent to a running `farm serve`: over its submit API the folder goes up as one
tar of its tree (size in the progress line), over its Ray address through the object store; both
land in the controller's store with every figure and the tokens agreeing with the reference."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.conftest import only_loopback
from tests.fleet.serve import FARM, Serving, clean_env, farm_serve

pytestmark = pytest.mark.slow
SPEC = "prompt=16,decode=8,reps=2"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serving, Path]]:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    root = tmp_path_factory.mktemp("serve")
    (root / "user").mkdir()
    with farm_serve(root / "user", root / "head") as serving:
        yield serving, root


def _submit(
    served: tuple[Serving, Path], folder: Path, address: str, name: str
) -> subprocess.CompletedProcess[str]:
    _, root = served
    return subprocess.run(
        [FARM, "submit", str(folder), "--generate", SPEC, "--address", address, "--json"],
        env=clean_env(root / "user", root / name),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _check(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    (job,) = document["jobs"]
    assert job["status"] == "ok" and job["reference"]["status"] == "passed"
    assert job["generation"]["agreement"]["share"] == 1.0
    assert job["generation"]["decode_tokens_per_s"]["median"] > 0
    return dict(document)


def test_over_the_submit_api_the_folder_goes_up_as_one_tar(
    served: tuple[Serving, Path], tiny_llama: Path
) -> None:
    serving, _ = served
    done = _submit(served, tiny_llama, serving.api_url, "api-submitter")
    _check(done)
    assert f"uploading {tiny_llama.name}/ (a folder, as one tar) (" in done.stderr
    again = _submit(served, tiny_llama, serving.api_url, "api-submitter")
    _check(again)
    assert "uploading" not in again.stderr  # the controller has it: nothing sent twice


def test_over_ray_the_folder_travels_through_the_object_store(
    served: tuple[Serving, Path], tiny_llama: Path
) -> None:
    serving, _ = served
    done = _submit(served, tiny_llama, serving.address, "ray-submitter")
    _check(done)
    assert f"shipping {tiny_llama.name} (" in done.stderr and "MB) to the object store" in done.stderr
