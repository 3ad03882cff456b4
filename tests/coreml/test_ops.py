"""Each lowered ONNX op, alone: the fp32 MIL program matches ONNX Runtime."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from tests.coreml.harness import assert_fp32_matches, random_feeds, save
from tests.coreml.onnx_models import Graph, f32, single_op

I64 = np.int64
INT64_MAX = np.iinfo(np.int64).max


def _where() -> onnx.ModelProto:
    g = Graph()
    a, b = g.input("a", [2, 3, 4]), g.input("b", [3, 4])
    g.output(g.one("Where", [g.one("Greater", [a, b]), a, g.one("Mul", [b, g.const(np.float32(2.0))])]))
    return g.model()


def _where_cond_wider(batch: object = 2) -> onnx.ModelProto:
    # both branches constant scalars: the result takes the condition's shape
    g = Graph()
    x = g.input("x", [batch, 3])
    g.output(
        g.one(
            "Where",
            [
                g.one("Greater", [x, g.const(np.float32(0.0))]),
                g.const(np.float32(1.0)),
                g.const(np.float32(-2.0)),
            ],
        )
    )
    return g.model()


def _cast_roundtrip() -> onnx.ModelProto:
    g = Graph()
    x = g.input("x", [2, 5])
    as_int = g.one("Cast", [g.one("Mul", [x, g.const(np.float32(10.0))])], to=TensorProto.INT32)
    g.output(g.one("Cast", [as_int], to=TensorProto.FLOAT))
    return g.model()


def _sin_cos() -> onnx.ModelProto:
    g = Graph()
    x = g.input("x", [2, 6])
    g.output(g.one("Add", [g.one("Sin", [x]), g.one("Cos", [x])]))
    return g.model()


def _argmax() -> onnx.ModelProto:
    # ArgMax's int64 output, as a float so both sides compare
    g = Graph()
    x = g.input("x", [3, 7, 2])
    index = g.one("ArgMax", [x], axis=-2, keepdims=0)
    g.output(g.one("Cast", [index], to=TensorProto.FLOAT))
    return g.model()


def _shape_derived_reshape() -> onnx.ModelProto:
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape: folded to a constant shape before lowering
    g = Graph()
    x = g.input("x", [2, 3, 4])
    dim0 = g.one(
        "Unsqueeze",
        [
            g.one("Gather", [g.one("Shape", [x]), g.const(np.array(0, I64))], axis=0),
            g.const(np.array([0], I64)),
        ],
    )
    g.output(g.one("Reshape", [x, g.one("Concat", [dim0, g.const(np.array([-1], I64))], axis=0)]))
    return g.model()


def _gather_embedding() -> onnx.ModelProto:
    g = Graph()
    ids = g.input("ids", [2, 5], TensorProto.INT64)
    g.output(g.one("Gather", [g.const(f32(7, 3)), ids], axis=0))
    return g.model()


def _matmul_batched() -> onnx.ModelProto:
    g = Graph()
    a, b = g.input("a", [2, 3, 4, 5]), g.input("b", [2, 3, 5, 6])
    g.output(g.one("MatMul", [a, b]))
    return g.model()


def _split(opset: int) -> onnx.ModelProto:
    g = Graph(opset=opset)
    x = g.input("x", [2, 7, 3])
    if opset >= 18:
        outs = g.op("Split", [x], n_out=3, axis=1, num_outputs=3)
    else:
        outs = g.op("Split", [x, g.const(np.array([2, 4, 1], I64))], n_out=3, axis=-2)
    for out in outs:
        g.output(out)
    return g.model()


CASES: dict[str, Callable[[], onnx.ModelProto]] = {
    # convolution
    "conv2d_pads_strides_dilations": lambda: single_op(
        "Conv",
        [[1, 3, 9, 9]],
        [f32(4, 3, 3, 3), f32(4)],
        kernel_shape=[3, 3],
        pads=[1, 2, 0, 1],
        strides=[2, 1],
        dilations=[1, 2],
    ),
    "conv2d_depthwise": lambda: single_op(
        "Conv", [[2, 4, 6, 6]], [f32(4, 1, 3, 3)], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=4
    ),
    "conv2d_grouped_same_upper": lambda: single_op(
        "Conv", [[1, 4, 7, 7]], [f32(6, 2, 3, 3)], strides=[2, 2], auto_pad="SAME_UPPER", group=2
    ),
    "conv1d": lambda: single_op(
        "Conv", [[1, 3, 20]], [f32(5, 3, 5), f32(5)], kernel_shape=[5], pads=[2, 2], strides=[2]
    ),
    "conv_transpose2d_output_padding": lambda: single_op(
        "ConvTranspose",
        [[1, 4, 5, 5]],
        [f32(4, 3, 3, 3), f32(3)],
        strides=[2, 2],
        pads=[1, 1, 1, 1],
        output_padding=[1, 1],
    ),
    "conv_transpose1d": lambda: single_op(
        "ConvTranspose", [[1, 6, 10]], [f32(6, 4, 8), f32(4)], strides=[4], pads=[2, 2]
    ),
    "conv_transpose_grouped_padding_past_pads": lambda: single_op(
        "ConvTranspose", [[1, 4, 6]], [f32(4, 2, 3), f32(4)], strides=[2], group=2, output_padding=[1]
    ),
    "conv_transpose_output_shape": lambda: single_op(
        "ConvTranspose", [[1, 2, 5, 5]], [f32(2, 3, 3, 3)], strides=[2, 2], output_shape=[10, 10]
    ),
    "batch_norm_4d": lambda: single_op(
        "BatchNormalization",
        [[2, 3, 4, 4]],
        [f32(3), f32(3, seed=1), f32(3, seed=2), np.abs(f32(3, seed=3)) + 0.5],
        epsilon=1e-3,
    ),
    "batch_norm_2d": lambda: single_op(
        "BatchNormalization", [[4, 3]], [f32(3), f32(3, seed=1), f32(3, seed=2), np.abs(f32(3, seed=3)) + 0.5]
    ),
    # activations
    "relu": lambda: single_op("Relu", [[2, 3, 4]]),
    "sigmoid": lambda: single_op("Sigmoid", [[2, 3, 4]]),
    "tanh": lambda: single_op("Tanh", [[2, 3, 4]]),
    "leaky_relu": lambda: single_op("LeakyRelu", [[2, 3, 4]], alpha=0.2),
    "clip_relu6": lambda: single_op("Clip", [[2, 3, 4]], [np.float32(0.0), np.float32(6.0)]),
    "clip_min_only": lambda: single_op("Clip", [[2, 3, 4]], [np.float32(-0.5)]),
    "clip_range": lambda: single_op("Clip", [[2, 3, 4]], [np.float32(-0.5), np.float32(0.7)]),
    "gelu_exact": lambda: single_op("Gelu", [[2, 8]], opset=20),
    "gelu_tanh": lambda: single_op("Gelu", [[2, 8]], opset=20, approximate="tanh"),
    "erf": lambda: single_op("Erf", [[2, 8]]),
    "softmax_axis1": lambda: single_op("Softmax", [[2, 5, 3]], axis=1),
    "softmax_last": lambda: single_op("Softmax", [[2, 5, 3]]),
    "layer_norm_last": lambda: single_op("LayerNormalization", [[2, 4, 8]], [f32(8), f32(8, seed=1)]),
    "layer_norm_two_axes_no_bias": lambda: single_op(
        "LayerNormalization", [[2, 4, 8]], [f32(4, 8)], axis=-2, epsilon=1e-3
    ),
    # arithmetic and broadcasting
    "add_broadcast": lambda: single_op("Add", [[2, 3, 4], [4]]),
    "sub_broadcast": lambda: single_op("Sub", [[2, 3, 4], [3, 1]]),
    "mul_const": lambda: single_op("Mul", [[2, 3, 4]], [f32(1, 3, 1)]),
    "div_broadcast": lambda: single_op("Div", [[2, 3, 4]], [np.abs(f32(4)) + 0.5]),
    "pow_square": lambda: single_op("Pow", [[2, 3]], [np.float32(2.0)]),
    "pow_cube": lambda: single_op("Pow", [[2, 3]], [np.float32(3.0)]),
    "sqrt": lambda: single_op("Sqrt", [[2, 3]]),
    "matmul_const": lambda: single_op("MatMul", [[2, 3, 4]], [f32(4, 5)]),
    "matmul_batched": _matmul_batched,
    "gemm_linear": lambda: single_op("Gemm", [[3, 4]], [f32(5, 4), f32(5)], transB=1),
    "gemm_general": lambda: single_op("Gemm", [[4, 3], [4, 5]], [f32(1, 5)], transA=1, alpha=0.5, beta=2.0),
    # layout
    "reshape_zero_and_minus_one": lambda: single_op("Reshape", [[2, 3, 4]], [np.array([0, -1, 2], I64)]),
    "transpose": lambda: single_op("Transpose", [[2, 3, 4]], perm=[2, 0, 1]),
    "transpose_default": lambda: single_op("Transpose", [[2, 3, 4]]),
    "flatten_axis2": lambda: single_op("Flatten", [[2, 3, 4, 5]], axis=2),
    "squeeze_negative": lambda: single_op("Squeeze", [[2, 1, 4, 1]], [np.array([-1, 1], I64)]),
    "unsqueeze_negative": lambda: single_op("Unsqueeze", [[2, 3]], [np.array([0, -1], I64)]),
    "concat_with_const": lambda: single_op("Concat", [[2, 3], [2, 1]], [f32(2, 2)], axis=-1),
    "split_sizes": lambda: _split(13),
    "split_num_outputs": lambda: _split(18),
    "slice_negative": lambda: single_op(
        "Slice", [[4, 10]], [np.array([-8], I64), np.array([-1], I64), np.array([1], I64), np.array([2], I64)]
    ),
    "slice_open_end": lambda: single_op(
        "Slice", [[4, 10]], [np.array([1, 2], I64), np.array([INT64_MAX, INT64_MAX], I64)]
    ),
    "slice_reverse": lambda: single_op(
        "Slice",
        [[4, 10]],
        [np.array([-1], I64), np.array([-INT64_MAX], I64), np.array([1], I64), np.array([-1], I64)],
    ),
    "gather_axis1_negative": lambda: single_op("Gather", [[3, 5, 2]], [np.array([-1, 0, 2], I64)], axis=1),
    "gather_scalar": lambda: single_op("Gather", [[3, 5]], [np.array(-2, I64)], axis=1),
    "gather_embedding": _gather_embedding,
    "shape_derived_reshape": _shape_derived_reshape,
    "pad_constant": lambda: single_op(
        "Pad", [[1, 2, 3, 4]], [np.array([0, 0, 1, 2, 0, 0, 2, 1], I64), np.float32(0.5)]
    ),
    "pad_reflect": lambda: single_op(
        "Pad", [[1, 2, 5, 6]], [np.array([0, 0, 1, 2, 0, 0, 2, 1], I64)], mode="reflect"
    ),
    "pad_edge_axes": lambda: single_op(
        "Pad", [[2, 5, 6]], [np.array([2, 1], I64), None, np.array([-1], I64)], opset=18, mode="edge"
    ),
    "max_pool_ceil": lambda: single_op(
        "MaxPool", [[1, 2, 7, 7]], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1
    ),
    "max_pool_pads": lambda: single_op(
        "MaxPool", [[1, 2, 6, 6]], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
    ),
    "avg_pool_exclude_pad": lambda: single_op(
        "AveragePool", [[1, 2, 6, 6]], kernel_shape=[3, 3], pads=[1, 1, 1, 1]
    ),
    "avg_pool_include_pad": lambda: single_op(
        "AveragePool", [[1, 2, 6, 6]], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1
    ),
    "avg_pool_1d": lambda: single_op("AveragePool", [[1, 2, 9]], kernel_shape=[2], strides=[2]),
    "global_average_pool": lambda: single_op("GlobalAveragePool", [[2, 3, 5, 4]]),
    "reduce_mean_attr": lambda: single_op("ReduceMean", [[2, 3, 4]], axes=[-1], keepdims=0),
    "reduce_mean_input_axes": lambda: single_op("ReduceMean", [[2, 3, 4]], [np.array([0, 2], I64)], opset=18),
    "reduce_mean_all": lambda: single_op("ReduceMean", [[2, 3, 4]], opset=18),
    "resize_nearest_x2": lambda: single_op(
        "Resize",
        [[1, 2, 3, 4]],
        [np.array([], np.float32), np.array([1, 1, 2, 2], np.float32)],
        mode="nearest",
    ),
    "resize_linear_sizes": lambda: single_op(
        "Resize",
        [[1, 2, 3, 4]],
        [np.array([], np.float32), np.array([], np.float32), np.array([1, 2, 6, 12], I64)],
        mode="linear",
    ),
    "resize_linear_align_corners": lambda: single_op(
        "Resize",
        [[1, 2, 3, 4]],
        [np.array([], np.float32), np.array([1, 1, 2, 2], np.float32)],
        mode="linear",
        coordinate_transformation_mode="align_corners",
    ),
    "resize_1d_nearest": lambda: single_op(
        "Resize", [[1, 2, 5]], [np.array([], np.float32), np.array([1, 1, 3], np.float32)], mode="nearest"
    ),
    "resize_1d_linear": lambda: single_op(
        "Resize", [[1, 2, 5]], [np.array([], np.float32), np.array([1, 1, 2], np.float32)], mode="linear"
    ),
    "instance_norm": lambda: single_op("InstanceNormalization", [[2, 3, 10]], [f32(3), f32(3, seed=1)]),
    "prelu_per_channel": lambda: single_op("PRelu", [[2, 3, 4, 4]], [np.abs(f32(3, 1, 1)) * 0.2]),
    "elu": lambda: single_op("Elu", [[2, 3, 4]], alpha=0.5),
    "sin_cos": _sin_cos,
    "argmax": _argmax,
    "cast_roundtrip": _cast_roundtrip,
    "where": _where,
    "where_cond_wider": _where_cond_wider,
    "expand": lambda: single_op("Expand", [[3, 1]], [np.array([2, 3, 4], I64)]),
}

POSITIVE_INPUTS = {"sqrt", "pow_cube"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_onnxruntime_in_fp32(case: str, tmp_path: Path) -> None:
    model = CASES[case]()
    feeds = random_feeds(model, positive=case in POSITIVE_INPUTS)
    if case == "gather_embedding":
        feeds = {"ids": np.array([[0, 6, 3, 3, 1], [2, 5, 4, 0, 6]], np.int64)}
    assert_fp32_matches(save(model, tmp_path), feeds)


def test_constant_of_shape_at_run_time(tmp_path: Path) -> None:
    # a mask as wide as a free batch dim: ConstantOfShape stays an op (MIL fill)
    g = Graph()
    x = g.input("x", ["N", 4])
    ones = g.one(
        "ConstantOfShape",
        [g.one("Shape", [x])],
        value=onnx.helper.make_tensor("v", TensorProto.FLOAT, [1], [2.0]),
    )
    g.output(g.one("Mul", [x, ones]))
    model = g.model()
    assert_fp32_matches(save(model, tmp_path), random_feeds(model, batch=3))


def test_where_cond_wider_with_a_free_dim(tmp_path: Path) -> None:
    model = _where_cond_wider(batch="N")
    assert_fp32_matches(save(model, tmp_path), random_feeds(model, batch=3))


def test_position_ids_from_a_free_sequence_length(tmp_path: Path) -> None:
    # as exporters write positions: Range(0, Shape(ids)[1]) expanded to ids' shape, then a table lookup
    g = Graph()
    ids = g.input("ids", ["B", "S"], TensorProto.INT64)
    shape = g.one("Shape", [ids])
    length = g.one("Gather", [shape, g.const(np.array(1, I64))], axis=0)
    positions = g.one("Range", [g.const(np.array(0, I64)), length, g.const(np.array(1, I64))])
    positions = g.one("Expand", [g.one("Unsqueeze", [positions, g.const(np.array([0], I64))]), shape])
    table = g.const(f32(16, 4))
    g.output(g.one("Add", [g.one("Gather", [table, ids]), g.one("Gather", [table, positions])]))
    model = g.model()
    path = save(model, tmp_path)
    for batch, seq in ((1, 5), (3, 9)):
        feeds = {"ids": np.random.default_rng(seq).integers(0, 16, (batch, seq)).astype(np.int64)}
        assert_fp32_matches(path, feeds)


def test_opsets_13_and_21_lower_alike(tmp_path: Path) -> None:
    for opset in (13, 21):
        model = single_op("ReduceSum", [[2, 3, 4]], [np.array([1], I64)], opset=opset, keepdims=1)
        assert_fp32_matches(save(model, tmp_path, f"opset{opset}.onnx"), random_feeds(model))


def test_outputs_that_alias_an_input_each_other_or_a_constant(tmp_path: Path) -> None:
    g = Graph()
    x = g.input("x", [2, 3])
    relu = g.one("Relu", [x])
    g.output(g.one("Identity", [relu]))
    g.output(g.one("Identity", [relu]))
    g.output(g.one("Identity", [x]))
    g.output(g.one("Cast", [g.one("Shape", [x])], to=TensorProto.FLOAT))
    model = g.model()
    reference = assert_fp32_matches(save(model, tmp_path), random_feeds(model))
    assert list(reference) == [o.name for o in model.graph.output]
