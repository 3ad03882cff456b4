"""Intermediate tensors of an ONNX model on the host: which ones to compare, and their values.

A copy of the model lists the chosen intermediate values as graph outputs, so ONNX Runtime
returns them beside the real outputs. Tensor names stay the source graph's, so every value is
traceable to the node that produced it. ONNX Runtime does not fuse away a node whose output is
a graph output, so with optimisations on, a fused chain is compared at its fused boundary: the
names inside it are absent from the optimised graph and are skipped.

`fp16_storage` makes the "fp16-cast copy" of the graph: every floating tensor between nodes (the
inputs and weights included) is rounded through float16, as on a backend that stores activations
in fp16 and computes inside each op in fp32. It predicts storage drift (overflow to inf above
65504, 11-bit mantissas), not a backend's own kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ondevice_farm.errors import ModelError

FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16})
#: nodes that produce constants, not layers
NOT_LAYERS = frozenset({"Constant", "ConstantOfShape", "Shape", "Size"})
_FP16_SUFFIX = "__farm_fp16"
_WIDE_SUFFIX = "__farm_fp32"


@dataclass(frozen=True)
class LayerPoint:
    """One intermediate (or output) tensor: `depth` is its node's index in graph order."""

    tensor: str
    node: str
    op_type: str
    depth: int
    #: the ONNX element type (`TensorProto.FLOAT`, ...)
    elem_type: int = TensorProto.FLOAT


def _value_infos(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # a model shape inference cannot walk still runs; types come from the outputs only
        inferred = model
    graph = inferred.graph
    return {
        value.name: value
        for value in [*graph.value_info, *graph.output, *graph.input]
        if value.type.tensor_type.elem_type
    }


def _float_value_types(model: onnx.ModelProto) -> dict[str, int]:
    return {name: value.type.tensor_type.elem_type for name, value in _value_infos(model).items()}


def layer_points(model: onnx.ModelProto) -> list[LayerPoint]:
    """The floating tensors each node produces, in graph (topological) order; unnamed nodes are
    named `<op_type>_<index>` as in the pre-flight and the report's op alignment."""
    types = _float_value_types(model)
    points: list[LayerPoint] = []
    for index, node in enumerate(model.graph.node):
        if node.op_type in NOT_LAYERS:
            continue
        name = node.name or f"{node.op_type}_{index}"
        for output in node.output:
            if output and types.get(output) in FLOAT_TYPES:
                points.append(LayerPoint(output, name, node.op_type, index, types[output]))
    return points


def _round_initializers_fp16(graph: onnx.GraphProto) -> None:
    for position, initializer in enumerate(graph.initializer):
        if initializer.data_type != TensorProto.FLOAT:
            continue
        value = numpy_helper.to_array(initializer)
        rounded = value.astype(np.float16).astype(np.float32)
        graph.initializer[position].CopyFrom(numpy_helper.from_array(rounded, initializer.name))


def _fp16_storage(model: onnx.ModelProto, types: dict[str, int]) -> None:
    """Round every fp32 tensor between nodes through fp16, keeping every tensor's name."""
    graph = model.graph
    _round_initializers_fp16(graph)
    renamed: dict[str, str] = {}
    nodes: list[onnx.NodeProto] = []
    for value in graph.input:
        if value.type.tensor_type.elem_type == TensorProto.FLOAT:
            renamed[value.name] = value.name + _WIDE_SUFFIX
            nodes.extend(_round_trip(value.name, value.name, value.name + _WIDE_SUFFIX))
    for node in graph.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]
        rounded: list[onnx.NodeProto] = []
        for position, output in enumerate(node.output):
            if output and types.get(output) == TensorProto.FLOAT:
                raw = output + "__farm_raw"
                node.output[position] = raw
                rounded.extend(_round_trip(output, raw, output))
        nodes.append(node)
        nodes.extend(rounded)
    del graph.node[:]
    graph.node.extend(nodes)


def _round_trip(label: str, source: str, result: str) -> list[onnx.NodeProto]:
    return [
        helper.make_node("Cast", [source], [label + _FP16_SUFFIX], to=TensorProto.FLOAT16),
        helper.make_node("Cast", [label + _FP16_SUFFIX], [result], to=TensorProto.FLOAT),
    ]


def with_outputs(
    model: onnx.ModelProto,
    tensors: list[str],
    *,
    fp16_storage: bool = False,
    known_types: dict[str, int] | None = None,
) -> onnx.ModelProto:
    """A copy of `model` whose graph outputs also list `tensors` (those it produces).
    `known_types` (name -> element type, e.g. from the source graph) serve where shape inference
    cannot walk this graph (an optimised graph with contrib ops)."""
    infos = _value_infos(model)
    types = {**(known_types or {}), **{n: v.type.tensor_type.elem_type for n, v in infos.items()}}
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    if fp16_storage:
        _fp16_storage(copy, types)
    produced = {output for node in copy.graph.node for output in node.output}
    present = {output.name for output in copy.graph.output}
    for name in tensors:
        if name in produced and name not in present and name in types:
            # with its inferred shape where known: a model's outputs need one for onnx.checker
            inferred = infos.get(name)
            if inferred is not None and inferred.type.tensor_type.HasField("shape"):
                copy.graph.output.append(inferred)
            else:
                copy.graph.output.append(helper.make_tensor_value_info(name, types[name], None))
            present.add(name)
    return copy


def run_with_outputs(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    tensors: list[str],
    *,
    fp16_storage: bool = False,
    optimize: bool = False,
    known_types: dict[str, int] | None = None,
) -> dict[str, np.ndarray]:
    """The values of `tensors` (and the model's outputs) on ONNX Runtime's CPU provider; a name
    the graph no longer produces is absent from the result."""
    import onnxruntime as ort

    exposed = with_outputs(model, tensors, fp16_storage=fp16_storage, known_types=known_types)
    options = ort.SessionOptions()
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(
            exposed.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        names = [output.name for output in session.get_outputs()]
        values = session.run(names, inputs)
    except Exception as exc:
        raise ModelError(f"the intermediate-value run failed: {str(exc).splitlines()[0]}") from None
    return {name: np.asarray(value) for name, value in zip(names, values, strict=True)}
