"""Edge cases of the index and broadcasting ops, with ONNX's reference implementation as the oracle.

`onnx.reference.ReferenceEvaluator` runs each one-node model next to the lowered MIL program on
the host executor. Where onnx.reference has no answer (negative pads), ONNX Runtime is the oracle.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

from ondevice_farm.errors import CompileError
from ondevice_farm.runtimes.coreml.compile import predict_drift
from ondevice_farm.runtimes.coreml.compile.executor import ExecutorError, run_program
from tests.coreml.harness import ort_outputs, save
from tests.coreml.onnx_models import Graph, f32, single_op

pytest.importorskip("coremltools")

I64 = np.int64
BIG = np.iinfo(np.int64).max


def _assert_matches_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp_path: Path) -> None:
    expected = ReferenceEvaluator(model).run(None, feeds)
    got = list(predict_drift(save(model, tmp_path), feeds, precision="fp32").values())
    assert len(got) == len(expected)
    for actual, reference in zip(got, expected, strict=True):
        assert actual.shape == reference.shape
        np.testing.assert_allclose(actual, reference, rtol=1e-5, atol=1e-5)


# -- Gemm: C broadcasts unidirectionally to (M, N) -----------------------------------------------
GEMM_C_SHAPES = [(5,), (1, 5), (4, 5), (4, 1), (), (1,), (1, 1)]


@pytest.mark.parametrize("trans_b", [0, 1], ids=["B", "Bt"])
@pytest.mark.parametrize("c_shape", GEMM_C_SHAPES, ids=[str(s) for s in GEMM_C_SHAPES])
def test_gemm_constant_c_broadcasts_as_the_spec_says(
    c_shape: tuple[int, ...], trans_b: int, tmp_path: Path
) -> None:
    b = f32(5, 3, seed=2) if trans_b else f32(3, 5, seed=2)
    c = f32(*c_shape, seed=3) if c_shape else np.array(1.5, np.float32)
    model = single_op("Gemm", [[4, 3]], [b, c], alpha=2.0, beta=0.5, transB=trans_b)
    _assert_matches_reference(model, {"x0": f32(4, 3)}, tmp_path)


def test_gemm_with_a_scalar_c_fed_at_run_time(tmp_path: Path) -> None:
    model = single_op("Gemm", [[4, 3], [3, 5], []])
    feeds = {"x0": f32(4, 3), "x1": f32(3, 5, seed=1), "x2": np.array(2.0, np.float32)}
    _assert_matches_reference(model, feeds, tmp_path)


# -- Slice: Python's clamping, as onnx.reference has it ---------------------------------------------
SLICES = [
    (-20, -30, -1),  # start below -dim with a negative step: nothing (the bug returned the whole axis)
    (-20, 0, -1),
    (20, -30, -1),
    (-3, -30, -1),
    (5, -1, -2),
    (9, -20, -3),
    (-1, -11, -1),
    (0, -1, -1),
    (8, 2, -2),
    (BIG, -BIG - 1, -1),
    (-100, 100, 1),
    (3, 3, 1),
    (-2, BIG, 3),
]


@pytest.mark.parametrize(("start", "end", "step"), SLICES, ids=[f"{a},{b},{c}" for a, b, c in SLICES])
def test_slice_bounds_match_onnx_reference(start: int, end: int, step: int, tmp_path: Path) -> None:
    model = single_op(
        "Slice",
        [[3, 10]],
        [np.array([start], I64), np.array([end], I64), np.array([1], I64), np.array([step], I64)],
    )
    _assert_matches_reference(model, {"x0": f32(3, 10)}, tmp_path)


def test_an_empty_slice_joins_a_concat(tmp_path: Path) -> None:
    g = Graph()
    x = g.input("x", [3, 10])
    empty = g.one("Slice", [x, g.const(np.array([-20], I64)), g.const(np.array([-30], I64)),
                            g.const(np.array([1], I64)), g.const(np.array([-1], I64))])  # fmt: skip
    g.output(g.one("Concat", [empty, x], axis=1))
    _assert_matches_reference(g.model(), {"x": f32(3, 10)}, tmp_path)


# -- negative indices: constants normalised at compile time, run-time ones inside the program -------
def _runtime(op_type: str, data: list[int], indices: list[int], **attrs: int) -> onnx.ModelProto:
    g = Graph()
    d = g.input("d", data)
    i = g.input("i", indices, TensorProto.INT64)
    g.output(g.one(op_type, [d, i], **attrs))
    return g.model()


def _scatter(indices: list[int], updates: list[int], reduction: str) -> onnx.ModelProto:
    g = Graph()
    d, i, u = g.input("d", [4, 3]), g.input("i", indices, TensorProto.INT64), g.input("u", updates)
    g.output(g.one("ScatterND", [d, i, u], reduction=reduction))
    return g.model()


INDEX_CASES: dict[str, tuple[Callable[[], onnx.ModelProto], dict[str, np.ndarray]]] = {
    "gather_const": (
        lambda: single_op("Gather", [[3, 5]], [np.array([[-1, -5], [0, 4]], I64)], axis=1),
        {"x0": f32(3, 5)},
    ),
    "gather_runtime": (
        lambda: _runtime("Gather", [3, 5], [2], axis=1),
        {"d": f32(3, 5), "i": np.array([-1, -5], I64)},
    ),
    "gather_runtime_free_dim": (
        lambda: _runtime("Gather", ["n", 4], [3], axis=0),
        {"d": f32(6, 4), "i": np.array([-1, 0, -6], I64)},
    ),
    "gather_elements_const": (
        lambda: single_op("GatherElements", [[3, 4]], [np.array([[-1, 0, -4, 2]] * 3, I64)], axis=1),
        {"x0": f32(3, 4)},
    ),
    "gather_elements_runtime": (
        lambda: _runtime("GatherElements", [3, 4], [2, 4], axis=0),
        {"d": f32(3, 4), "i": np.array([[-1, 0, -3, 2]] * 2, I64)},
    ),
    "scatter_nd_const": (
        lambda: single_op("ScatterND", [[4, 3]], [np.array([[-1], [0]], I64), f32(2, 3, seed=9)]),
        {"x0": f32(4, 3)},
    ),
    "scatter_nd_runtime_add": (
        lambda: _scatter([2, 1], [2, 3], "add"),
        {"d": f32(4, 3), "i": np.array([[-1], [0]], I64), "u": f32(2, 3, seed=1)},
    ),
    "scatter_nd_runtime_depth2": (
        lambda: _scatter([2, 2], [2], "none"),
        {"d": f32(4, 3), "i": np.array([[-1, -3], [0, 2]], I64), "u": f32(2, seed=1)},
    ),
    "scatter_nd_runtime_max": (
        lambda: _scatter([2, 1], [2, 3], "max"),
        {"d": f32(4, 3), "i": np.array([[-2], [1]], I64), "u": f32(2, 3, seed=1)},
    ),
}


@pytest.mark.parametrize("case", sorted(INDEX_CASES))
def test_negative_indices_match_onnx_reference(case: str, tmp_path: Path) -> None:
    build, feeds = INDEX_CASES[case]
    _assert_matches_reference(build(), feeds, tmp_path)


def test_the_executor_reads_a_negative_ios17_index_as_out_of_bounds() -> None:
    # what the device does with a negative index since iOS 17: the lowering must never emit one
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    @mb.program(input_specs=[mb.TensorSpec(shape=(3, 5)), mb.TensorSpec(shape=(2,), dtype=types.int32)],
                opset_version=pytest.importorskip("coremltools").target.iOS17)  # fmt: skip
    def program(x: object, i: object) -> object:
        return mb.gather(x=x, indices=i, axis=1)

    feeds = {"x": f32(3, 5), "i": np.array([-1, 0], np.int32)}
    with pytest.raises(ExecutorError, match="out of bounds"):
        run_program(program, feeds)


# -- Pad with negative pads: ONNX Runtime is the oracle (onnx.reference cannot take them) -----------
def test_negative_pads_crop_as_onnx_runtime_does(tmp_path: Path) -> None:
    model = single_op("Pad", [[1, 2, 5, 6]], [np.array([0, 0, -1, 2, 0, 0, 1, -2], I64), np.float32(0.5)])
    path = save(model, tmp_path)
    feeds = {"x0": f32(1, 2, 5, 6)}
    expected = next(iter(ort_outputs(path, feeds).values()))
    got = next(iter(predict_drift(path, feeds, precision="fp32").values()))
    np.testing.assert_array_equal(got, expected)


def test_negative_pads_in_reflect_mode_are_refused(tmp_path: Path) -> None:
    model = single_op("Pad", [[1, 2, 5, 6]], [np.array([0, 0, -1, 2, 0, 0, 1, -2], I64)], mode="reflect")
    with pytest.raises(CompileError, match="negative pads are supported in constant mode only"):
        predict_drift(save(model, tmp_path), {"x0": f32(1, 2, 5, 6)}, precision="fp32")


@pytest.mark.parametrize(
    ("mode", "pads", "dtype"),
    [
        ("wrap", [0, 1, 2, 0, 3, 1], np.float32),
        ("wrap", [1, 0, 7, 0, 0, 2], np.float32),  # a pad longer than its axis wraps again
        ("reflect", [0, 2, 1, 0, 1, 3], np.int32),  # MIL's pad takes floats only: gathers
        ("edge", [1, 0, 2, 2, 0, 1], np.int64),
    ],
    ids=["wrap", "wrap_long", "reflect_int", "edge_int"],
)
def test_pad_modes_by_gather_match_onnx_reference(
    mode: str, pads: list[int], dtype: type, tmp_path: Path
) -> None:
    g = Graph(opset=19)
    x = g.input(
        "x",
        [2, 3, 4],
        TensorProto.INT64 if dtype == np.int64 else onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
    )
    g.output(
        g.one("Pad", [x, g.const(np.array(pads, I64))], mode=mode), g.inputs[0].type.tensor_type.elem_type
    )
    value = np.arange(24).reshape(2, 3, 4).astype(dtype)
    _assert_matches_reference(g.model(), {"x": value}, tmp_path)


# -- Resize: each coordinate mode the lowering takes, against onnx.reference ----------------------
RESIZES = [
    (mode, coords, scale)
    for mode, coords in [
        ("linear", "half_pixel"),
        ("linear", "pytorch_half_pixel"),
        ("linear", "align_corners"),
        ("linear", "asymmetric"),
        ("nearest", "asymmetric"),
        ("nearest", "half_pixel"),
    ]
    for scale in (2.0, 3.0, 0.5)
    if not (mode == "nearest" and scale < 1)
]


@pytest.mark.parametrize(("mode", "coords", "scale"), RESIZES, ids=[f"{m}-{c}-x{s:g}" for m, c, s in RESIZES])
def test_resize_coordinate_modes_match_onnx_reference(
    mode: str, coords: str, scale: float, tmp_path: Path
) -> None:
    nearest = (
        {"nearest_mode": "floor" if coords == "asymmetric" else "round_prefer_floor"}
        if mode == "nearest"
        else {}
    )
    model = single_op(
        "Resize",
        [[1, 2, 4, 6]],
        [np.array([], np.float32), np.array([1, 1, scale, scale], np.float32)],
        opset=19,
        mode=mode,
        coordinate_transformation_mode=coords,
        **nearest,
    )
    _assert_matches_reference(model, {"x0": f32(1, 2, 4, 6)}, tmp_path)


@pytest.mark.parametrize(
    ("mode", "coords", "extra"),
    [
        ("linear", "half_pixel_symmetric", {}),
        ("nearest", "align_corners", {"nearest_mode": "round_prefer_floor"}),
        ("nearest", "half_pixel", {"nearest_mode": "floor"}),
    ],
)
def test_resize_modes_beyond_upsample_match_onnx_reference(
    mode: str, coords: str, extra: dict[str, str], tmp_path: Path
) -> None:
    # CoreML's upsample ops cannot sample these: they lower as interpolation matrices
    model = single_op(
        "Resize", [[1, 2, 4, 6]], [np.array([], np.float32), np.array([1, 1, 2, 2], np.float32)],
        opset=19, mode=mode, coordinate_transformation_mode=coords, **extra,
    )  # fmt: skip
    _assert_matches_reference(model, {"x0": f32(1, 2, 4, 6)}, tmp_path)


# -- scalar (rank-0) inputs and outputs ----------------------------------------------------------
def test_a_scalar_input_and_output_lower_and_run(tmp_path: Path) -> None:
    g = Graph()
    x = g.input("x", [2, 3])
    rate = g.input("sr", [], TensorProto.FLOAT)
    scaled = g.one("Mul", [x, rate])
    g.output(scaled)
    g.output(g.one("ReduceSum", [scaled], keepdims=0))
    _assert_matches_reference(g.model(), {"x": f32(2, 3), "sr": np.array(3.0, np.float32)}, tmp_path)
