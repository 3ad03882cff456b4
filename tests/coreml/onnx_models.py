"""Small ONNX models for the CoreML tests, built with onnx.helper (seeded weights)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
SEED = 5


def f32(*shape: int, seed: int = SEED, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


@dataclass
class Graph:
    """A graph under construction: nodes, initializers, inputs and outputs."""

    opset: int = OPSET
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inits: list[onnx.TensorProto] = field(default_factory=list)
    inputs: list[onnx.ValueInfoProto] = field(default_factory=list)
    outputs: list[onnx.ValueInfoProto] = field(default_factory=list)
    count: int = 0

    def input(self, name: str, shape: list[Any], dtype: int = TensorProto.FLOAT) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def const(self, value: np.ndarray, name: str | None = None) -> str:
        self.count += 1
        name = name or f"c{self.count}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> list[str]:
        self.count += 1
        outs = [f"{op_type.lower()}{self.count}_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=f"{op_type}_{self.count}", **attrs))
        return outs

    def one(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        return self.op(op_type, inputs, **attrs)[0]

    def output(self, name: str, dtype: int = TensorProto.FLOAT) -> None:
        self.outputs.append(helper.make_tensor_value_info(name, dtype, None))

    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "test", self.inputs, self.outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 8
        # Outputs are declared without shapes; shape inference fills them in as an exporter would.
        inferred = onnx.shape_inference.infer_shapes(model)
        for declared, found in zip(model.graph.output, inferred.graph.output, strict=True):
            declared.CopyFrom(found)
            if not declared.type.tensor_type.HasField("shape"):
                declared.type.tensor_type.shape.SetInParent()
        onnx.checker.check_model(model)
        return model


def single_op(
    op_type: str,
    shapes: list[list[Any]],
    consts: list[np.ndarray] | None = None,
    opset: int = OPSET,
    n_out: int = 1,
    **attrs: Any,
) -> onnx.ModelProto:
    """One node: float inputs x0, x1, ... of `shapes`, then constant inputs `consts`."""
    g = Graph(opset=opset)
    names = [g.input(f"x{i}", shape) for i, shape in enumerate(shapes)]
    names += [g.const(c) if c is not None and c.size else "" for c in consts or []]
    for out in g.op(op_type, names, n_out=n_out, **attrs):
        g.output(out)
    return g.model()


def mobilenet_block_stack(batch: Any = 1) -> onnx.ModelProto:
    """MobileNetV2-style: Conv+BN+ReLU6 stem, two inverted residual blocks (one with a skip), head."""
    g = Graph()
    x = g.input("image", [batch, 3, 32, 32])
    seed = iter(range(100, 200))

    def conv_bn(x: str, cin: int, cout: int, k: int, stride: int, groups: int, act: bool) -> str:
        w = g.const(
            f32(cout, cin // groups, k, k, seed=next(seed), scale=(2.0 / (cin // groups * k * k)) ** 0.5)
        )
        y = g.one(
            "Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=groups
        )
        rng = np.random.default_rng(next(seed))
        scale = g.const(rng.uniform(0.5, 1.5, cout).astype(np.float32))
        bias = g.const(rng.uniform(-0.1, 0.1, cout).astype(np.float32))
        mean = g.const(rng.uniform(-0.1, 0.1, cout).astype(np.float32))
        var = g.const(rng.uniform(0.5, 1.5, cout).astype(np.float32))
        y = g.one("BatchNormalization", [y, scale, bias, mean, var], epsilon=1e-5)
        if act:
            y = g.one("Clip", [y, g.const(np.array(0.0, np.float32)), g.const(np.array(6.0, np.float32))])
        return y

    def inverted(x: str, cin: int, cout: int, stride: int) -> str:
        hidden = cin * 4
        y = conv_bn(x, cin, hidden, 1, 1, 1, True)
        y = conv_bn(y, hidden, hidden, 3, stride, hidden, True)
        y = conv_bn(y, hidden, cout, 1, 1, 1, False)
        return g.one("Add", [x, y]) if stride == 1 and cin == cout else y

    y = conv_bn(x, 3, 8, 3, 2, 1, True)
    y = inverted(y, 8, 8, 1)
    y = inverted(y, 8, 16, 2)
    y = g.one("GlobalAveragePool", [y])
    y = g.one("Flatten", [y], axis=1)
    logits = g.one("Gemm", [y, g.const(f32(10, 16, seed=7, scale=0.3)), g.const(f32(10, seed=8))], transB=1)
    g.output(logits)
    return g.model()


def transformer_encoder(
    batch: Any = 1, seq: int = 16, dim: int = 32, heads: int = 2, vocab: int = 50
) -> onnx.ModelProto:
    """One encoder block: token + position embedding (Gather), attention, LayerNorm, erf-GELU MLP.

    Head splitting reads the batch size through Shape -> Gather -> Concat, as exporters write it,
    so a fixed batch folds to constants and a free one stays a run-time shape computation.
    """
    g = Graph()
    ids = g.input("input_ids", [batch, seq], TensorProto.INT64)
    head = dim // heads
    table = g.const(f32(vocab, dim, seed=1, scale=0.5))
    x = g.one("Gather", [table, ids], axis=0)
    x = g.one("Add", [x, g.const(f32(seq, dim, seed=2, scale=0.1))])
    ln1 = g.one(
        "LayerNormalization",
        [x, g.const(f32(dim, seed=3) * 0.1 + 1), g.const(f32(dim, seed=4) * 0.1)],
        axis=-1,
    )

    batch_dim = g.one("Gather", [g.one("Shape", [ln1]), g.const(np.array([0], np.int64))], axis=0)
    split_shape = g.one("Concat", [batch_dim, g.const(np.array([seq, heads, head], np.int64))], axis=0)

    def heads_of(w_seed: int) -> str:
        proj = g.one("MatMul", [ln1, g.const(f32(dim, dim, seed=w_seed, scale=dim**-0.5))])
        proj = g.one("Add", [proj, g.const(f32(dim, seed=w_seed + 50, scale=0.05))])
        return g.one("Transpose", [g.one("Reshape", [proj, split_shape])], perm=[0, 2, 1, 3])

    q, k, v = heads_of(10), heads_of(11), heads_of(12)
    scores = g.one("MatMul", [q, g.one("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = g.one("Div", [scores, g.const(np.array(np.sqrt(head), np.float32))])
    attn = g.one("Softmax", [scores], axis=-1)
    ctx = g.one("Transpose", [g.one("MatMul", [attn, v])], perm=[0, 2, 1, 3])
    merge_shape = g.one("Concat", [batch_dim, g.const(np.array([seq, dim], np.int64))], axis=0)
    ctx = g.one("Reshape", [ctx, merge_shape])
    out = g.one("MatMul", [ctx, g.const(f32(dim, dim, seed=13, scale=dim**-0.5))])
    x = g.one("Add", [x, out])
    ln2 = g.one(
        "LayerNormalization", [x, g.const(np.ones(dim, np.float32)), g.const(np.zeros(dim, np.float32))]
    )
    h = g.one("MatMul", [ln2, g.const(f32(dim, 4 * dim, seed=14, scale=dim**-0.5))])
    # GELU as exporters write it: 0.5 * x * (1 + erf(x / sqrt(2)))
    erf = g.one("Erf", [g.one("Div", [h, g.const(np.array(np.sqrt(2.0), np.float32))])])
    h = g.one(
        "Mul",
        [
            g.one("Mul", [h, g.one("Add", [erf, g.const(np.array(1.0, np.float32))])]),
            g.const(np.array(0.5, np.float32)),
        ],
    )
    h = g.one("MatMul", [h, g.const(f32(4 * dim, dim, seed=15, scale=(4 * dim) ** -0.5))])
    x = g.one("Add", [x, h])
    pooled = g.one("ReduceMean", [x], axes=[1], keepdims=0)
    logits = g.one("Gemm", [pooled, g.const(f32(2, dim, seed=16)), g.const(f32(2, seed=17))], transB=1)
    g.output(logits)
    return g.model()


def conv1d_upsampler(batch: Any = 1, mels: int = 16, frames: int = 12) -> onnx.ModelProto:
    """Vocoder-like: conv1d, two ConvTranspose1d x4 upsamplers with LeakyReLU, conv1d to audio, tanh."""
    g = Graph()
    x = g.input("mel", [batch, mels, frames])
    y = g.one(
        "Conv",
        [x, g.const(f32(32, mels, 7, seed=20, scale=0.15)), g.const(f32(32, seed=21, scale=0.1))],
        kernel_shape=[7],
        pads=[3, 3],
    )
    channels = 32
    for i in range(2):
        y = g.one("LeakyRelu", [y], alpha=0.1)
        w = g.const(f32(channels, channels // 2, 8, seed=30 + i, scale=0.15))
        y = g.one(
            "ConvTranspose",
            [y, w, g.const(f32(channels // 2, seed=40 + i, scale=0.1))],
            kernel_shape=[8],
            strides=[4],
            pads=[2, 2],
        )
        channels //= 2
        res = g.one(
            "Conv",
            [g.one("LeakyRelu", [y], alpha=0.1), g.const(f32(channels, channels, 3, seed=50 + i, scale=0.2))],
            kernel_shape=[3],
            pads=[3, 3],
            dilations=[3],
        )
        y = g.one("Add", [y, res])
    y = g.one("LeakyRelu", [y], alpha=0.1)
    y = g.one("Conv", [y, g.const(f32(1, channels, 7, seed=60, scale=0.2))], kernel_shape=[7], pads=[3, 3])
    g.output(g.one("Tanh", [y]))
    return g.model()


def resnet_blocks(batch: Any = 1, width: int = 16) -> onnx.ModelProto:
    """ResNet-18-style: Conv+BN+ReLU stem, max pool, two basic blocks (the second strided, with a
    1x1 projection on its skip), global average pool, Gemm classifier."""
    g = Graph()
    x = g.input("image", [batch, 3, 32, 32])
    seed = iter(range(300, 400))

    def conv_bn(x: str, cin: int, cout: int, k: int, stride: int, relu: bool) -> str:
        w = g.const(f32(cout, cin, k, k, seed=next(seed), scale=(2.0 / (cin * k * k)) ** 0.5))
        y = g.one("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
        rng = np.random.default_rng(next(seed))
        params = [
            rng.uniform(lo, hi, cout).astype(np.float32)
            for lo, hi in ((0.5, 1.5), (-0.1, 0.1), (-0.1, 0.1), (0.5, 1.5))
        ]
        y = g.one("BatchNormalization", [y, *(g.const(p) for p in params)], epsilon=1e-5)
        return g.one("Relu", [y]) if relu else y

    def basic(x: str, cin: int, cout: int, stride: int) -> str:
        y = conv_bn(conv_bn(x, cin, cout, 3, stride, True), cout, cout, 3, 1, False)
        skip = x if stride == 1 and cin == cout else conv_bn(x, cin, cout, 1, stride, False)
        return g.one("Relu", [g.one("Add", [y, skip])])

    y = conv_bn(x, 3, width, 3, 1, True)
    y = g.one("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = basic(y, width, width, 1)
    y = basic(y, width, 2 * width, 2)
    y = g.one("Flatten", [g.one("GlobalAveragePool", [y])], axis=1)
    logits = g.one(
        "Gemm", [y, g.const(f32(10, 2 * width, seed=9, scale=0.3)), g.const(f32(10, seed=10))], transB=1
    )
    g.output(logits)
    return g.model()
