"""ONNX's QOperator format (QLinearConv, QLinearMatMul) rewritten to the QDQ format before lowering.

A QLinear op is, by its spec, DequantizeLinear on each quantized input, the float op, and
QuantizeLinear on its output. Rewritten so, before lowering, it reaches the MIL ops the QDQ path
uses: 8-bit constant weights stay 8-bit (`constexpr_*`), a QuantizeLinear read only by the next
op's DequantizeLinear becomes the iOS 17 `quantize`/`dequantize` pair, and anything MIL has no
op for runs as the spec's arithmetic (see lower_quant.py). The int32 bias of QLinearConv is
dequantized here (`bias * x_scale * w_scale`, zero point 0), as a float constant.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper

from ondevice_farm.runtimes.coreml.compile.fold import FoldedGraph

#: QLinearConv inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B
#: QLinearMatMul inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point


def expand_qoperators(graph: FoldedGraph) -> FoldedGraph:
    """The graph with every QLinearConv/QLinearMatMul as DequantizeLinear -> op -> QuantizeLinear."""
    if not any(node.op_type in ("QLinearConv", "QLinearMatMul") for node in graph.nodes):
        return graph
    nodes: list[onnx.NodeProto] = []
    for node in graph.nodes:
        if node.domain not in ("", "ai.onnx") or node.op_type not in ("QLinearConv", "QLinearMatMul"):
            nodes.append(node)
            continue
        nodes.extend(_expand(node, graph))
    graph.nodes = nodes
    return graph


def _expand(node: onnx.NodeProto, graph: FoldedGraph) -> list[onnx.NodeProto]:
    inputs = list(node.input) + [""] * (9 - len(node.input))
    label = node.name or node.output[0]
    conv = node.op_type == "QLinearConv"
    x_float, w_float, y_float = (f"{node.output[0]}__{part}_float" for part in ("x", "w", "y"))
    # a per-channel weight scale runs along Conv's output channels, or MatMul's columns (b's last axis)
    w_rank = _rank(graph, inputs[3])
    w_axis = 0 if conv else max(w_rank - 1, 0)
    expanded = [
        _dequantize(inputs[0:3], x_float, f"{label}/dequantize_x", _activation_axis(graph, node, inputs)),
        _dequantize(inputs[3:6], w_float, f"{label}/dequantize_w", w_axis),
    ]
    float_inputs = [x_float, w_float]
    if conv and inputs[8]:
        float_inputs.append(_float_bias(graph, inputs, label))
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    op_type = "Conv" if conv else "MatMul"
    expanded.append(helper.make_node(op_type, float_inputs, [y_float], name=f"{label}/{op_type}", **attrs))
    quantize_inputs = [y_float, inputs[6]] + ([inputs[7]] if inputs[7] else [])
    expanded.append(
        helper.make_node("QuantizeLinear", quantize_inputs, [node.output[0]], name=f"{label}/quantize_y")
    )
    return expanded


def _dequantize(names: list[str], output: str, name: str, axis: int | None) -> onnx.NodeProto:
    attrs: dict[str, Any] = {"axis": axis} if axis is not None else {}
    kept = names if names[2] else names[:2]
    return helper.make_node("DequantizeLinear", kept, [output], name=name, **attrs)


def _rank(graph: FoldedGraph, name: str) -> int:
    if name in graph.constants:
        return int(np.asarray(graph.constants[name]).ndim)
    return len(graph.shapes.get(name, ()))


def _activation_axis(graph: FoldedGraph, node: onnx.NodeProto, inputs: list[str]) -> int | None:
    """QLinearMatMul may quantize `a` per row (a vector scale along its second-to-last axis)."""
    scale = graph.constants.get(inputs[1])
    if scale is None or np.asarray(scale).size == 1 or node.op_type == "QLinearConv":
        return None
    return max(_rank(graph, inputs[0]) - 2, 0)


def _float_bias(graph: FoldedGraph, inputs: list[str], label: str) -> str:
    """QLinearConv's int32 bias as floats: bias * x_scale * w_scale (its zero point is 0)."""
    bias, x_scale, w_scale = (graph.constants.get(inputs[i]) for i in (8, 1, 4))
    name = f"{label}/bias_float"
    if bias is None or x_scale is None or w_scale is None:
        # left to the lowering, which names what must be constant
        return inputs[8]
    scale = np.asarray(x_scale, np.float32).reshape(-1) * np.asarray(w_scale, np.float32).reshape(-1)
    graph.constants[name] = (np.asarray(bias).astype(np.float64) * scale).astype(np.float32)
    return name
