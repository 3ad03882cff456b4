"""An ONNX model with its weights in external data files is the model file *and* those files:
one identity over both, stored, compiled, shipped and unpacked together, refused in one line when
a file is missing or named outside the model's folder."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest

from ondevice_farm.artifacts import (
    ArtifactStore,
    pack_artifact,
    sha256_file,
    sha256_path,
    unpack_artifact,
)
from ondevice_farm.errors import DeviceError, ModelError
from ondevice_farm.onnx_external import external_files

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

WIDTH = 64


def matmul_model(folder: Path, *, location: str | None = "weights/w.data", seed: int = 0) -> Path:
    """y = x @ w, w (WIDTH x WIDTH) in `location` beside the model (inline when None)."""
    from onnx import TensorProto, helper, numpy_helper

    folder.mkdir(parents=True, exist_ok=True)
    w = np.random.default_rng(seed).standard_normal((WIDTH, WIDTH)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WIDTH])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "mm.onnx"
    if location is not None and "/" in location and ".." not in location:
        (folder / location).parent.mkdir(parents=True, exist_ok=True)
    if location is None:
        onnx.save_model(model, str(path))
    else:
        onnx.save_model(model, str(path), save_as_external_data=True, location=location, size_threshold=0)
    return path


def outputs(path: Path) -> np.ndarray:
    x = np.ones((1, WIDTH), np.float32)
    return np.asarray(ort.InferenceSession(str(path)).run(None, {"x": x})[0])


def test_the_identity_covers_the_data_files(tmp_path: Path) -> None:
    model = matmul_model(tmp_path / "a")
    assert external_files(model) == ("weights/w.data",)
    assert sha256_path(model) != sha256_file(model)
    retrained = matmul_model(tmp_path / "b", seed=1)
    assert sha256_file(retrained) == sha256_file(model)  # the same graph file...
    assert sha256_path(retrained) != sha256_path(model)  # ...is a new model with new weights
    inline = matmul_model(tmp_path / "c", location=None)
    assert external_files(inline) == () and sha256_path(inline) == sha256_file(inline)


def test_stored_with_its_data_and_loadable(tmp_path: Path) -> None:
    model = matmul_model(tmp_path / "src")
    sha, stored = ArtifactStore(tmp_path / "store").put(model, "model.onnx")
    assert sha == sha256_path(model)
    assert (stored.parent / "weights/w.data").is_file()
    assert sha256_path(stored) == sha
    np.testing.assert_array_equal(outputs(stored), outputs(model))


def test_shipped_and_unpacked_whole(tmp_path: Path) -> None:
    model = matmul_model(tmp_path / "src")
    sha = sha256_path(model)
    shipped = pack_artifact(model, sha)
    assert shipped.with_external
    with tarfile.open(fileobj=io.BytesIO(shipped.data)) as archive:
        assert sorted(archive.getnames()) == ["mm.onnx", "weights/w.data"]
    arrived = unpack_artifact(shipped, tmp_path / "cache")
    assert arrived == tmp_path / "cache" / sha / "mm.onnx"
    np.testing.assert_array_equal(outputs(arrived), outputs(model))
    assert not list((tmp_path / "cache" / sha).glob(".arriving-*"))


def test_damaged_data_on_the_way_is_refused_and_not_kept(tmp_path: Path) -> None:
    model = matmul_model(tmp_path / "src")
    sha = sha256_path(model)
    other = pack_artifact(matmul_model(tmp_path / "other", seed=1), sha256_path(tmp_path / "other/mm.onnx"))
    forged = type(other)(other.name, sha, other.is_tree, other.data, with_external=True)
    with pytest.raises(DeviceError, match="arrived as"):
        unpack_artifact(forged, tmp_path / "cache")
    assert not (tmp_path / "cache" / sha / "mm.onnx").exists()
    assert not (tmp_path / "cache" / sha / "weights").exists()


def test_a_missing_data_file_is_one_line(tmp_path: Path) -> None:
    model = matmul_model(tmp_path / "src")
    (tmp_path / "src/weights/w.data").unlink()
    with pytest.raises(ModelError, match=r"external data file weights/w.data is missing") as caught:
        sha256_path(model)
    assert "\n" not in str(caught.value)


def test_data_named_outside_the_models_folder_is_refused(tmp_path: Path) -> None:
    model = matmul_model(tmp_path / "src", location="w.data")
    proto = onnx.load(str(model), load_external_data=False)  # onnx itself will not write `..`
    for entry in proto.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../w.data"
    model.write_bytes(proto.SerializeToString())
    (tmp_path / "w.data").write_bytes((tmp_path / "src/w.data").read_bytes())
    with pytest.raises(ModelError, match="outside the model's folder"):
        external_files(model)


def test_ort_compile_ships_the_weights_with_the_model(tmp_path: Path) -> None:
    from ondevice_farm.runtimes.ort.compile import SHIPPED_EXTERNAL_DATA, compile_ort
    from ondevice_farm.targets import Target

    model = matmul_model(tmp_path / "src")
    compiled = compile_ort(model, Target.parse("ort/cpu"), ArtifactStore(tmp_path / "store"))
    assert external_files(compiled.path) == (SHIPPED_EXTERNAL_DATA,)
    assert compiled.report.extra["artifact_bytes"] > WIDTH * WIDTH * 4
    (tmp_path / "src/weights/w.data").unlink()  # the compiled model needs nothing of the source
    np.testing.assert_allclose(outputs(compiled.path), outputs(matmul_model(tmp_path / "again")), rtol=1e-6)
