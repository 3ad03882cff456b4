"""Constant folding on the ONNX graph, before lowering.

Exporters leave whole subgraphs that compute shapes and indices from constants
(Shape -> Gather -> Unsqueeze -> Concat -> Reshape). Folding them here keeps
them out of the ML Program and out of the unsupported-op list: an op inside
such a subgraph (Mod, Range, ConstantOfShape, ...) never reaches the device.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from ondevice_farm.runtimes.coreml.compile.onnx_graph import (
    Dim,
    TensorInfo,
    default_opset,
    graph_inputs,
    graph_outputs,
)

#: ops whose output is not a function of their inputs: never folded
_NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli"}
)


@dataclass
class FoldedGraph:
    """The graph that is left to lower, with every tensor known before run time."""

    nodes: list[onnx.NodeProto]
    constants: dict[str, np.ndarray]
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    opset: int
    #: static or symbolic shapes ONNX shape inference found, by tensor name
    shapes: dict[str, tuple[Dim, ...]] = field(default_factory=dict)
    #: ONNX element types ONNX type inference found, by tensor name (a lowering that holds a
    #: type in another, as bfloat16 in fp32, reads what the value should be here)
    elem_types: dict[str, int] = field(default_factory=dict)
    #: op type -> how many nodes folding removed
    folded: Counter[str] = field(default_factory=Counter)


#: folding passes at most: each pass that inlines an If infers shapes again for the next
MAX_FOLD_PASSES = 8


def fold_constants(model: onnx.ModelProto, *, keep_dequantize: bool = False) -> FoldedGraph:
    """Fold constant subgraphs; `keep_dequantize` leaves DequantizeLinear nodes (8-bit weights
    the lowering keeps 8-bit) unfolded.

    Shape inference knows nothing inside an If's branches, so once a pass has inlined one, the
    graph left is folded again with fresh shapes: a Shape or Size read inside the branch (and
    the Ifs that test it, as an exported RNN's batch checks do) folds then."""
    graph = _fold_pass(model, keep_dequantize)
    total = Counter(graph.folded)
    for _ in range(MAX_FOLD_PASSES - 1):
        if not graph.folded.get("If"):
            break
        graph = _fold_pass(_as_model(graph, model), keep_dequantize)
        total.update(graph.folded)
    graph.folded = total
    return graph


def _as_model(graph: FoldedGraph, original: onnx.ModelProto) -> onnx.ModelProto:
    """The graph left after a pass as a model again: its nodes, its constants as initializers."""
    names = {info.name for info in graph.inputs}
    inputs = [vi for vi in original.graph.input if vi.name in names]
    inits = [numpy_helper.from_array(np.asarray(value), name) for name, value in graph.constants.items()]
    body = helper.make_graph(graph.nodes, original.graph.name, inputs, list(original.graph.output), inits)
    model = helper.make_model(body, opset_imports=list(original.opset_import))
    model.ir_version = original.ir_version
    return model


def _fold_pass(model: onnx.ModelProto, keep_dequantize: bool) -> FoldedGraph:
    opset = default_opset(model)
    shapes, elem_types = _inferred_shapes(model)
    constants: dict[str, np.ndarray] = {
        init.name: numpy_helper.to_array(init) for init in model.graph.initializer
    }
    remaining: list[onnx.NodeProto] = []
    folded: Counter[str] = Counter()
    pending = deque(model.graph.node)
    while pending:
        node = pending.popleft()
        taken = _taken_branch(node, constants)
        if taken is not None:
            # an If whose condition folding has made constant is its taken branch, inlined
            folded[node.op_type] += 1
            pending.extendleft(reversed(_inline(node, taken, constants)))
            continue
        keep = keep_dequantize and node.op_type == "DequantizeLinear"
        values = None if keep else _try_fold(node, constants, shapes, opset)
        if values is None:
            remaining.append(node)
            continue
        folded[node.op_type] += 1
        for name, value in zip(node.output, values, strict=False):
            if name:
                constants[name] = value
    used = {name for node in remaining for name in node.input} | {o.name for o in model.graph.output}
    return FoldedGraph(
        nodes=remaining,
        constants={name: value for name, value in constants.items() if name in used},
        inputs=graph_inputs(model),
        outputs=graph_outputs(model),
        opset=opset,
        shapes=shapes,
        elem_types=elem_types,
        folded=folded,
    )


def _taken_branch(node: onnx.NodeProto, constants: dict[str, np.ndarray]) -> onnx.GraphProto | None:
    """The branch an If node takes, where its condition is known before run time."""
    if node.op_type != "If" or node.domain not in ("", "ai.onnx") or node.input[0] not in constants:
        return None
    branches: dict[str, onnx.GraphProto] = {attr.name: attr.g for attr in node.attribute}
    condition = np.asarray(constants[node.input[0]])
    if condition.size != 1:
        return None
    return branches["then_branch" if bool(condition.reshape(-1)[0]) else "else_branch"]


def _inline(
    node: onnx.NodeProto, branch: onnx.GraphProto, constants: dict[str, np.ndarray]
) -> list[onnx.NodeProto]:
    """The branch's nodes, then an Identity from each branch output to the If's output.

    ONNX names are unique across a model and its subgraphs (SSA), and a branch reads the outer
    scope by name, so its nodes run unchanged in the outer graph."""
    for init in branch.initializer:
        constants[init.name] = numpy_helper.to_array(init)
    nodes = list(branch.node)
    for inner, outer in zip(branch.output, node.output, strict=True):
        if outer:
            nodes.append(
                helper.make_node("Identity", [inner.name], [outer], name=f"{node.name or outer}/taken")
            )
    return nodes


def _try_fold(
    node: onnx.NodeProto,
    constants: dict[str, np.ndarray],
    shapes: dict[str, tuple[Dim, ...]],
    opset: int,
) -> list[np.ndarray] | None:
    if node.domain not in ("", "ai.onnx") or node.op_type in _NONDETERMINISTIC:
        return None
    if any(attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for attr in node.attribute):
        return None
    if node.op_type in ("Shape", "Size"):
        return _fold_shape(node, shapes)
    if node.op_type == "Constant" and len(node.attribute) == 1 and node.attribute[0].name == "value":
        # the common case, read directly: exporters emit thousands of these
        return [numpy_helper.to_array(node.attribute[0].t)]
    if not all(name == "" or name in constants for name in node.input):
        return None
    feeds = {name: constants[name] for name in node.input if name}
    try:
        return [np.asarray(v) for v in _evaluate(node, feeds, opset)]
    except Exception:
        # Anything the reference evaluator cannot run stays a node: lowering decides then.
        return None


def _fold_shape(node: onnx.NodeProto, shapes: dict[str, tuple[Dim, ...]]) -> list[np.ndarray] | None:
    shape = shapes.get(node.input[0])
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    dims = np.array(shape, dtype=np.int64)
    if node.op_type == "Size":
        return [np.array(int(np.prod(dims)), dtype=np.int64)]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    start = int(attrs.get("start", 0))
    end = attrs.get("end")
    return [dims[start : None if end is None else int(end)]]


def _evaluate(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int) -> list[np.ndarray]:
    graph = helper.make_graph(
        [node],
        "fold",
        [helper.make_empty_tensor_value_info(name) for name in feeds],
        [helper.make_empty_tensor_value_info(name) for name in node.output if name],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return list(ReferenceEvaluator(model).run(None, feeds))


def _inferred_shapes(model: onnx.ModelProto) -> tuple[dict[str, tuple[Dim, ...]], dict[str, int]]:
    """Shapes and element types by tensor name, as ONNX's inference finds them."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:
        # Shape inference is a help for folding, not a requirement: lowering infers its own.
        inferred = model
    shapes: dict[str, tuple[Dim, ...]] = {}
    elem_types: dict[str, int] = {}
    graph = inferred.graph
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        tensor_type = vi.type.tensor_type
        if tensor_type.elem_type:
            elem_types[vi.name] = int(tensor_type.elem_type)
        if not tensor_type.HasField("shape"):
            continue
        dims: list[Dim] = []
        for dim in tensor_type.shape.dim:
            dims.append(int(dim.dim_value) if dim.HasField("dim_value") else (dim.dim_param or "?"))
        shapes[vi.name] = tuple(dims)
    return shapes, elem_types
