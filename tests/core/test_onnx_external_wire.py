"""`external_files` reads a model's protobuf wire format without onnx (issue 39); onnx's own walk
(`onnx.external_data_helper._get_all_tensors` on `onnx.load(..., load_external_data=False)`) is
the answer it must give. Each model here is read both ways: the ones the farm's tests build, one
with every place onnx looks for a tensor (and two it does not), encodings only a hand-written
message has (merged occurrences, unknown enum values, overlong varints), and damaged bytes,
where the reader either agrees with onnx or hands the file to onnx."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from onnx import ModelProto, TensorProto, ValueInfoProto, helper, numpy_helper

from ondevice_farm import onnx_external
from ondevice_farm.errors import ModelError
from ondevice_farm.onnx_external import external_files
from tests.core.test_external_data import matmul_model

REPO = Path(__file__).resolve().parents[2]


def _by_onnx(data: bytes, tmp_path: Path) -> list[tuple[str, str]]:
    path = tmp_path / "by_onnx.onnx"
    path.write_bytes(data)
    return onnx_external._external_tensors_by_onnx(path)


def _by_wire(data: bytes) -> list[tuple[str, str]] | None:
    """The reader's answer; None where it leaves the model to onnx."""
    try:
        return onnx_external._Wire(data).external_tensors()
    except onnx_external._Undecided:
        return None


def _external(tensor: TensorProto, location: str | None) -> TensorProto:
    tensor.data_location = TensorProto.EXTERNAL
    entries = {"location": location} if location is not None else {}
    for key, value in {**entries, "offset": "0", "length": "16"}.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    tensor.ClearField("raw_data")
    return tensor


def _tensor(name: str) -> TensorProto:
    return numpy_helper.from_array(np.arange(4, dtype=np.float32), name)


def _value(name: str) -> ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [4])


def _everywhere() -> ModelProto:
    """External tensors in every place onnx looks: initializers (the graph's and an If branch's),
    a Constant's `value` (in a branch, a Loop body and a function), a TENSORS attribute, a GRAPHS
    attribute's subgraphs; and in two places onnx does not (a sparse initializer, a function's
    subgraph initializer), so neither does the reader."""
    then_branch = helper.make_graph(
        [helper.make_node("Constant", [], ["t"], value=_external(_tensor("then_c"), "then_c.data"))],
        "then", [], [_value("t")],
    )  # fmt: skip
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["else_i"], ["e"])], "else", [], [_value("e")],
        [_external(_tensor("else_i"), "sub/else_i.data")],
    )  # fmt: skip
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["b"], value=_external(_tensor("loop_c"), "loop_c.data"))],
        "body", [], [_value("b")],
    )  # fmt: skip
    listed = helper.make_node("Custom", [], ["q"], domain="x.y")
    listed.attribute.append(helper.make_attribute("ts", [_external(_tensor("t1"), "t1.data"), _tensor("t2")]))
    several = helper.make_graph([], "gs", [], [], [_external(_tensor("gs_i"), "gs.data")])
    listed.attribute.append(helper.make_attribute("gs", [several, several]))
    nodes = [
        helper.make_node("If", ["cond"], ["y"], then_branch=then_branch, else_branch=else_branch),
        helper.make_node("Loop", ["", "cond"], ["l"], body=body),
        helper.make_node("Add", ["y", "w"], ["z"], axis=-1, alpha=-2.5),  # ten-byte varints
        listed,
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])], [_value("z")],
        [_external(_tensor("w"), "w.data"), _tensor("inline")],
    )  # fmt: skip
    graph.sparse_initializer.append(
        helper.make_sparse_tensor(_external(_tensor("sparse_v"), "sparse.data"), _tensor("sparse_i"), [8])
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    inner = helper.make_graph(
        [helper.make_node("Constant", [], ["fo"], value=_external(_tensor("f_sub_c"), "f_sub_c.data"))],
        "inner", [], [_value("fo")], [_external(_tensor("f_sub_i"), "f_sub_i.data")],
    )  # fmt: skip
    function_nodes = [
        helper.make_node("Constant", [], ["fb"], value=_external(_tensor("f_c"), "f.data")),
        helper.make_node("If", ["a"], ["r"], then_branch=inner, else_branch=inner),
    ]
    model.functions.append(
        helper.make_function("local", "F", ["a"], ["fb"], function_nodes, [helper.make_opsetid("", 17)])
    )
    return model


def _tensor_in_graph(tail: bytes) -> bytes:
    """A model whose one initializer is external, with `tail` appended to its bytes."""
    tensor: bytes = _external(_tensor("u"), "u.data").SerializeToString() + tail
    graph = b"\x2a" + bytes([len(tensor)]) + tensor  # GraphProto.initializer = 5
    model: bytes = helper.make_model(helper.make_graph([], "m", [], [])).SerializeToString()
    return model + b"\x3a" + bytes([len(graph)]) + graph  # ModelProto.graph = 7, merged into the first


def _cases() -> dict[str, bytes]:
    everywhere = _everywhere().SerializeToString()
    late = helper.make_model(helper.make_graph([], "x", [], [], [_external(_tensor("late"), "late.data")]))
    no_location = helper.make_model(helper.make_graph([], "x", [], [], [_external(_tensor("n"), None)]))
    return {
        "tinynet": (REPO / "examples" / "tinynet.onnx").read_bytes(),
        "everywhere": everywhere,
        "two graph fields, merged": everywhere + late.SerializeToString(),
        "graph as a varint (an unknown field)": b"\x38\x05" + everywhere,
        "no location entry": no_location.SerializeToString(),
        "unknown DataLocation 2 keeps EXTERNAL": _tensor_in_graph(b"\x70\x02"),
        "DEFAULT after EXTERNAL": _tensor_in_graph(b"\x70\x00"),
        "EXTERNAL as an overlong varint": _tensor_in_graph(b"\x70\x81\x00"),
        "EXTERNAL past 32 bits": _tensor_in_graph(b"\x70\x81\x80\x80\x80\x10"),
        "data_location as bytes (an unknown field)": _tensor_in_graph(b"\x72\x01\x00"),
        "a second name": _tensor_in_graph(b"\x42\x03abc"),
        "a second location": _tensor_in_graph(b"\x6a\x0c\x0a\x08location\x12\x00"),
        "empty": b"",
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_the_reader_finds_what_onnx_finds(case: str, tmp_path: Path) -> None:
    data = _cases()[case]
    assert _by_wire(data) == _by_onnx(data, tmp_path)


def test_the_everywhere_model_has_what_onnx_walks_and_nothing_else() -> None:
    # in onnx's order: every initializer (the branches' and subgraphs' too), then the attributes'
    # tensors; no sparse initializer, no initializer of a function's subgraph
    assert _by_wire(_everywhere().SerializeToString()) == [
        ("w", "w.data"),
        ("else_i", "sub/else_i.data"),
        ("gs_i", "gs.data"),
        ("gs_i", "gs.data"),
        ("then_c", "then_c.data"),
        ("loop_c", "loop_c.data"),
        ("t1", "t1.data"),
        ("f_c", "f.data"),
        ("f_sub_c", "f_sub_c.data"),  # the function's If: its then branch...
        ("f_sub_c", "f_sub_c.data"),  # ...and its else branch, the same graph
    ]


def test_models_the_tests_build_agree(tmp_path: Path) -> None:
    from ondevice_farm.artifacts import ArtifactStore
    from ondevice_farm.runtimes.ort.compile import compile_ort
    from ondevice_farm.targets import Target

    external = matmul_model(tmp_path / "a")
    inline = matmul_model(tmp_path / "b", location=None)
    compiled = compile_ort(external, Target.parse("ort/cpu"), ArtifactStore(tmp_path / "store")).path
    for model in (external, inline, compiled):  # the last written by ONNX Runtime, not onnx
        assert _by_wire(model.read_bytes()) == _by_onnx(model.read_bytes(), tmp_path)
    assert external_files(external) == ("weights/w.data",) and external_files(inline) == ()


def test_damaged_bytes_are_left_to_onnx_or_read_alike(tmp_path: Path) -> None:
    """Where the reader answers and protobuf parses the file, the answers are the same; bytes
    the reader does not walk (a tensor's contents, shapes) may be damaged without its noticing,
    where onnx refuses the whole file (and the run would fail on the controller)."""
    bases = list(_cases().values())[1:4]
    rng = random.Random(39)
    answered = 0
    for _ in range(400):
        data = bytearray(rng.choice(bases))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(data))
            if rng.random() < 0.7:
                data[at] = rng.randrange(256)
            else:
                del data[at:]
        found = _by_wire(bytes(data))
        if found is None:
            continue
        try:
            ModelProto().ParseFromString(bytes(data))
        except Exception:  # protobuf refuses it: onnx would say "no external files"
            continue
        answered += 1
        assert found == _by_onnx(bytes(data), tmp_path), bytes(data).hex()
    assert answered > 20


def test_a_file_the_reader_cannot_vouch_for_goes_to_onnx(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[Path] = []
    by_onnx = onnx_external._external_tensors_by_onnx

    def recorded(path: Path) -> list[tuple[str, str]]:
        asked.append(path)
        return by_onnx(path)

    monkeypatch.setattr(onnx_external, "_external_tensors_by_onnx", recorded)
    model = matmul_model(tmp_path / "m")
    assert external_files(model) == ("weights/w.data",) and not asked  # decided without onnx
    cut = tmp_path / "m" / "cut.onnx"
    cut.write_bytes(model.read_bytes()[:-3])
    assert external_files(cut) == () and asked == [cut]  # protobuf refuses a cut file
    text = tmp_path / "m" / "notes.onnx"
    text.write_text("not a model\n")
    assert external_files(text) == () and asked == [cut, text]


def test_deep_nesting_is_left_to_onnx(tmp_path: Path) -> None:
    graph = helper.make_graph([], "leaf", [], [], [_external(_tensor("deep"), "deep.data")])
    for level in range(25):  # past the reader's depth, short of protobuf's limit of 100 messages
        node = helper.make_node("If", ["c"], [f"o{level}"], then_branch=graph)
        graph = helper.make_graph([node], f"g{level}", [], [])
    data = helper.make_model(graph).SerializeToString()
    assert _by_wire(data) is None
    path = tmp_path / "deep.onnx"
    path.write_bytes(data)
    (tmp_path / "deep.data").write_bytes(b"\0" * 16)
    assert external_files(path) == tuple(sorted({loc for _, loc in _by_onnx(data, tmp_path)}))


def test_a_missing_location_is_the_same_error(tmp_path: Path) -> None:
    model = tmp_path / "n.onnx"
    model.write_bytes(_cases()["no location entry"])
    with pytest.raises(ModelError, match="tensor 'n' keeps its data at ''"):
        external_files(model)
