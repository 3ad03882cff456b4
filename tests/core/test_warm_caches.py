"""What a warm `farm submit` keeps between runs so it needs no onnx: the model's description and
its ONNX Runtime compile, by content hash; and that the CLI loads a command's imports only.

Every cached value is checked against a fresh computation, and a changed file (new bytes, new
hash) is never served from the cache.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from ondevice_farm.artifacts import ArtifactStore, sha256_path
from ondevice_farm.errors import ModelError
from ondevice_farm.model import ONNX_DTYPES, OUTPUT_ONLY_DTYPES, inspect_model
from ondevice_farm.model_cache import inspect_model_cached
from ondevice_farm.runtimes.ort.cache import compile_ort_cached
from ondevice_farm.runtimes.ort.compile import compile_ort
from ondevice_farm.targets import Target

REPO = Path(__file__).resolve().parents[2]


def test_the_dtype_table_holds_the_onnx_specs_numbers() -> None:
    tp = onnx.TensorProto
    assert ONNX_DTYPES == {
        tp.FLOAT: "float32", tp.FLOAT16: "float16", tp.DOUBLE: "float64", tp.INT64: "int64",
        tp.INT32: "int32", tp.INT16: "int16", tp.INT8: "int8", tp.UINT8: "uint8", tp.BOOL: "bool",
    }  # fmt: skip
    assert OUTPUT_ONLY_DTYPES == {tp.STRING: "str"}


def _must_not_recompute(*args: object, **kwargs: object) -> None:
    raise AssertionError("served from the cache, this is not called")


def test_a_cached_description_equals_a_fresh_one_and_follows_the_path(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "models"
    first = inspect_model_cached(model, cache)
    assert len(list(cache.glob("*.json"))) == 1
    moved = tmp_path / "elsewhere" / "renamed.onnx"
    moved.parent.mkdir()
    shutil.copy(model, moved)
    fresh = inspect_model(moved)
    with monkeypatch.context() as patch:
        patch.setattr("ondevice_farm.model_cache.inspect_model", _must_not_recompute)
        again = inspect_model_cached(moved, cache)
    assert again == fresh  # from the cache, under its new path and name
    assert first.sha256 == again.sha256 and again.name == "renamed"


def test_changed_bytes_are_inspected_again_and_a_bad_model_is_never_kept(model: Path, tmp_path: Path) -> None:
    cache = tmp_path / "models"
    inspect_model_cached(model, cache)
    loaded = onnx.load(str(model))
    loaded.graph.output[0].name = "renamed_output"
    loaded.graph.node[-1].output[0] = "renamed_output"
    onnx.save(loaded, str(model))
    assert inspect_model_cached(model, cache).outputs[0].name == "renamed_output"
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    for _ in range(2):
        with pytest.raises(ModelError):
            inspect_model_cached(broken, cache)
    assert not list(cache.glob(f"{sha256_path(broken)}*"))


def test_a_cached_compile_equals_a_fresh_one_while_its_artifact_is_stored(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    cache = tmp_path / "compiled"
    target = Target.parse("ort/cpu")
    sha = sha256_path(model)
    first = compile_ort_cached(model, sha, target, store, cache)
    (entry,) = cache.glob("*.json")
    assert "onnxruntime==" in entry.name
    with monkeypatch.context() as patch:
        patch.setattr("ondevice_farm.runtimes.ort.compile.compile_ort", _must_not_recompute)
        cached = compile_ort_cached(model, sha, target, store, cache)
    fresh = compile_ort(model, target, store)
    assert cached.report.to_dict() == fresh.report.to_dict() == first.report.to_dict()
    assert cached.sha256 == fresh.sha256 and cached.path == fresh.path
    # the artifact gone from the store: compiled again, not a dangling path
    shutil.rmtree(fresh.path.parent)
    again = compile_ort_cached(model, sha, target, store, cache)
    assert again.path.is_file()
    assert json.loads(entry.read_text())["sha256"] == again.sha256


@pytest.mark.parametrize("command", ["runs", "show", "submit", "devices", "serve", "cancel"])
def test_a_command_imports_neither_onnx_nor_ray_before_it_runs(command: str) -> None:
    """onnx costs 1-4 s to import, Ray 0.5-2 s: `farm COMMAND --help` loads neither."""
    probe = (
        "import sys\n"
        "from ondevice_farm.cli.main import cli\n"
        f"try:\n    cli(['{command}', '--help'], prog_name='farm')\n"
        "except SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in ('onnx', 'ray', 'ml_dtypes') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "LOADED []"
