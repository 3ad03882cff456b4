"""Build `examples/tinynet.onnx`: a small MobileNetV2-style classifier with seeded weights.

Real architecture, random weights: Conv+BatchNorm+ReLU6 stems, inverted residual blocks with
depthwise convolutions, global pooling and a classifier head. Small (about 0.2 MB), so the
first `farm submit` finishes in seconds, but it exercises what ONNX Runtime fuses
(Conv+BN folding, Conv+Clip -> FusedConv) and a dynamic batch dimension.

    python examples/make_tinynet.py [OUT.onnx]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
SEED = 20261129


class GraphBuilder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}_{self.count}"

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int, groups: int, act: bool) -> str:
        conv = self._name("Conv")
        fan_in = cin // groups * k * k
        w = self.const(f"{conv}.w", self.rng.normal(0, (2.0 / fan_in) ** 0.5, (cout, cin // groups, k, k)))
        self.nodes.append(
            helper.make_node(
                "Conv",
                [x, w],
                [f"{conv}.out"],
                name=conv,
                kernel_shape=[k, k],
                strides=[stride, stride],
                pads=[k // 2] * 4,
                group=groups,
            )
        )
        bn = self._name("BatchNormalization")
        params = [
            self.const(f"{bn}.scale", self.rng.uniform(0.5, 1.5, cout)),
            self.const(f"{bn}.bias", self.rng.normal(0, 0.1, cout)),
            self.const(f"{bn}.mean", self.rng.normal(0, 0.1, cout)),
            self.const(f"{bn}.var", self.rng.uniform(0.5, 1.5, cout)),
        ]
        self.nodes.append(
            helper.make_node("BatchNormalization", [f"{conv}.out", *params], [f"{bn}.out"], name=bn)
        )
        if not act:
            return f"{bn}.out"
        clip = self._name("Clip")
        lo = self.const(f"{clip}.min", np.array(0.0))
        hi = self.const(f"{clip}.max", np.array(6.0))
        self.nodes.append(helper.make_node("Clip", [f"{bn}.out", lo, hi], [f"{clip}.out"], name=clip))
        return f"{clip}.out"

    def inverted_residual(self, x: str, cin: int, cout: int, stride: int, expand: int) -> str:
        hidden = cin * expand
        y = self.conv_bn(x, cin, hidden, 1, 1, 1, act=True)
        y = self.conv_bn(y, hidden, hidden, 3, stride, hidden, act=True)
        y = self.conv_bn(y, hidden, cout, 1, 1, 1, act=False)
        if stride == 1 and cin == cout:
            add = self._name("Add")
            self.nodes.append(helper.make_node("Add", [x, y], [f"{add}.out"], name=add))
            return f"{add}.out"
        return y


def build(seed: int = SEED, classes: int = 100) -> onnx.ModelProto:
    g = GraphBuilder(seed)
    x = g.conv_bn("image", 3, 16, 3, 2, 1, act=True)
    for cin, cout, stride in [(16, 16, 1), (16, 24, 2), (24, 24, 1), (24, 32, 2), (32, 32, 1), (32, 64, 2)]:
        x = g.inverted_residual(x, cin, cout, stride, expand=4)
    x = g.conv_bn(x, 64, 128, 1, 1, 1, act=True)
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"], name="GlobalAveragePool_head"))
    g.nodes.append(helper.make_node("Flatten", ["pooled"], ["features"], name="Flatten_head", axis=1))
    w = g.const("fc.w", g.rng.normal(0, 0.05, (classes, 128)))
    b = g.const("fc.b", np.zeros(classes))
    g.nodes.append(helper.make_node("Gemm", ["features", w, b], ["logits"], name="Gemm_head", transB=1))
    g.nodes.append(helper.make_node("Softmax", ["logits"], ["probabilities"], name="Softmax_head", axis=-1))
    graph = helper.make_graph(
        g.nodes,
        "tinynet",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 96, 96])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", classes])],
        g.inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="farm-examples"
    )
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("tinynet.onnx")
    onnx.save(build(), str(out))
    print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB)")
