from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ondevice_farm.errors import UsageError
from ondevice_farm.inputs import parse_shapes, resolve_shapes, seeded_inputs
from ondevice_farm.model import inspect_model
from ondevice_farm.profiles import load_profiles, match_profile
from ondevice_farm.targets import Target


def test_shipped_profiles_load_and_recognise_their_units() -> None:
    profiles = load_profiles()
    assert {"host-cpu", "pixel8", "galaxy-s24", "iphone15", "iphone15-pro"} <= set(profiles)
    assert Target.parse("ort/qnn") in profiles["galaxy-s24"].targets
    assert match_profile({"ro.product.model": "Pixel 8"}, profiles, "android") == profiles["pixel8"]
    assert match_profile({"ProductType": "iPhone16,1"}, profiles, "ios") == profiles["iphone15-pro"]
    assert match_profile({"ro.product.model": "Pixel 9"}, profiles, "android") is None


def test_shape_parsing() -> None:
    assert parse_shapes(["image=1x3x224x224", "mask=1,64"]) == {"image": (1, 3, 224, 224), "mask": (1, 64)}
    with pytest.raises(UsageError):
        parse_shapes(["image"])


def _embedding_model(tmp_path: Path) -> Path:
    table = helper.make_tensor("table", TensorProto.FLOAT, [7, 4], np.arange(28, dtype=np.float32).tolist())
    node = helper.make_node("Gather", ["table", "ids"], ["emb"], name="embed")
    graph = helper.make_graph(
        [node],
        "emb",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("emb", TensorProto.FLOAT, ["batch", "seq", 4])],
        [table],
    )
    path = tmp_path / "emb.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_seeded_inputs_are_deterministic_and_stay_inside_embeddings(tmp_path: Path) -> None:
    path = _embedding_model(tmp_path)
    info = inspect_model(path)
    shapes = resolve_shapes(info, {"ids": (2, 300)})
    first = seeded_inputs(info, shapes, 0)["ids"]
    again = seeded_inputs(info, shapes, 0)["ids"]
    other = seeded_inputs(info, shapes, 1)["ids"]
    assert first.shape == (2, 300) and first.dtype == np.int64
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    assert first.min() >= 0 and first.max() < 7  # valid rows of the 7-row table only


def test_dynamic_dims_default_to_one(tmp_path: Path) -> None:
    info = inspect_model(_embedding_model(tmp_path))
    assert resolve_shapes(info, {}) == {"ids": (1, 1)}
