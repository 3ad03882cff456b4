"""The state one ONNX -> MIL lowering carries, and the loop that walks the graph.

Each ONNX op has one small function (in lower_*.py, gathered in table.py) that
reads its node through a `Lowering` and returns one value per node output. A
value is a MIL `Var`, or a numpy array where the value is known before run time
(weights, shapes, axes): ops that need constants (Reshape's shape, Slice's
starts) read them as arrays, and arrays become MIL consts where an op needs a Var.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto

from ondevice_farm.runtimes.coreml.compile.fold import FoldedGraph
from ondevice_farm.runtimes.coreml.compile.narrow_floats import (
    EXACT_OPS,
    HELD_IN_FP32,
    NARROW_FLOATS,
    ROUNDED_ONCE_OPS,
    round_to_format,
)
from ondevice_farm.runtimes.coreml.compile.onnx_graph import as_mil_array, node_attrs, node_label
from ondevice_farm.runtimes.coreml.compile.quantization import (
    QuantizationPlan,
    QuantizedWeight,
    constexpr_weight,
)


class NotLowerable(Exception):
    """An op this lowering has no MIL form for (or not with these attributes)."""


@dataclass(frozen=True)
class Unlowered:
    """One node the lowering could not take, and why."""

    op_type: str
    node: str
    reason: str


#: the reason given for a node whose op type has no lowering at all
NO_LOWERING = "no lowering for this op type"


class LoweringFailed(Exception):
    """Nodes of the graph could not be lowered; all of them are listed, not only the first."""

    def __init__(self, failures: list[Unlowered]) -> None:
        super().__init__(f"{len(failures)} node(s) cannot be lowered")
        self.failures = failures


#: ONNX tensor type -> MIL dtype name; ML Programs hold no 64-bit tensors
MIL_DTYPES: dict[int, str] = {
    TensorProto.FLOAT: "fp32",
    TensorProto.DOUBLE: "fp32",
    TensorProto.FLOAT16: "fp16",
    TensorProto.INT64: "int32",
    TensorProto.INT32: "int32",
    TensorProto.INT16: "int32",
    TensorProto.INT8: "int32",
    TensorProto.UINT8: "int32",
    TensorProto.BOOL: "bool",
    # 4-bit and 2-bit integers are held in int32 (their values are exact there)
    TensorProto.INT4: "int32",
    TensorProto.UINT4: "int32",
    TensorProto.INT2: "int32",
    TensorProto.UINT2: "int32",
}

#: graph inputs an ML Program takes only after a cast at its boundary (no unsigned tensors in MIL);
#: the compile report says so for each such input
BOUNDARY_DTYPES: dict[int, str] = {
    **MIL_DTYPES,
    TensorProto.UINT16: "int32",
    TensorProto.UINT32: "int32",
    TensorProto.UINT64: "int32",
    # float8, bfloat16, float4: every value is an fp32 value (see narrow_floats)
    **dict.fromkeys(HELD_IN_FP32, "fp32"),
}

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]")


def mil_name(onnx_name: str) -> str:
    """A MIL-safe name for an ONNX tensor name (which may hold '.', ':', '/')."""
    name = _NAME_CHARS.sub("_", onnx_name) or "t"
    return f"t_{name}" if name[0].isdigit() else name


@dataclass
class Lowering:
    """What a lowering function sees: the MIL builder and the values of the graph so far."""

    mb: Any
    types: Any
    opset: int
    values: dict[str, Any] = field(default_factory=dict)
    #: constants as ONNX has them (int8 stays int8; `values` holds them widened for MIL)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    #: tensor name -> op types of the nodes reading it ("output" for a graph output)
    consumers: dict[str, list[str]] = field(default_factory=dict)
    quantization: QuantizationPlan = field(default_factory=QuantizationPlan)
    #: ONNX element type by tensor name, where ONNX type inference knows it
    elem_types: dict[str, int] = field(default_factory=dict)
    #: DequantizeLinear outputs that are constant 8-bit weights: a Var of them is a constexpr op
    quantized: dict[str, QuantizedWeight] = field(default_factory=dict)
    #: QuantizeLinear outputs passed on as float (the pair dropped)
    dropped_quantize: set[str] = field(default_factory=set)
    _names: set[str] = field(default_factory=set)
    _weights: dict[str, Any] = field(default_factory=dict)

    # -- reading a node ------------------------------------------------------------------
    def has(self, node: onnx.NodeProto, index: int) -> bool:
        return len(node.input) > index and node.input[index] != ""

    def value(self, name: str) -> Any:
        if name not in self.values:
            raise NotLowerable(f"input {name!r} is not produced by any earlier node")
        return self.values[name]

    def var(self, name: str) -> Any:
        """The input as a MIL Var (a const op for known values, a constexpr op for 8-bit weights)."""
        if name in self.quantized:
            return self.weight(name)
        value = self.value(name)
        if isinstance(value, np.ndarray):
            return self.mb.const(val=value)
        return value

    def weight(self, name: str, *, transpose: bool = False, factor: float = 1.0) -> Any:
        """A constant weight as an op argument: kept 8-bit where it is quantized (and the plan keeps
        it), a float array otherwise; `transpose`/`factor` give linear's (N, K) layout and alpha."""
        quantized = self.quantized.get(name)
        if quantized is None or self.quantization.weight_op is None:
            value = self.const(name)
            if value is None:
                raise NotLowerable(f"weight {name!r} must be a constant")
            array = value.T if transpose else value
            return (array * np.float32(factor)).astype(np.float32) if factor != 1.0 else array
        key = f"{name}|{transpose}|{factor}"
        if key not in self._weights:
            self._weights[key] = constexpr_weight(
                self.mb,
                self.quantization.weight_op,
                quantized.for_linear(transpose, factor) if transpose or factor != 1.0 else quantized,
                self.unique_name(f"{name}_8bit"),
            )
        return self._weights[key]

    def const(self, name: str) -> np.ndarray | None:
        """The input's value if it is known before run time, else None."""
        value = self.value(name)
        if isinstance(value, np.ndarray):
            return value
        known = getattr(value, "val", None)
        return None if known is None else np.asarray(known)

    def require_const(self, node: onnx.NodeProto, index: int, what: str) -> np.ndarray:
        value = self.const(node.input[index]) if self.has(node, index) else None
        if value is None:
            raise NotLowerable(f"{what} must be a constant")
        return value

    def shape(self, name: str) -> tuple[Any, ...]:
        value = self.value(name)
        return tuple(value.shape)

    def rank(self, name: str) -> int:
        return len(self.shape(name))

    def static_dims(self, name: str) -> list[int | None]:
        return [int(d) if isinstance(d, (int, np.integer)) else None for d in self.shape(name)]

    def attrs(self, node: onnx.NodeProto) -> dict[str, Any]:
        return node_attrs(node)

    # -- naming the outputs --------------------------------------------------------------
    def name(self, node: onnx.NodeProto, index: int = 0) -> str:
        """A unique MIL name for the node's output `index`, after the ONNX tensor name."""
        return self.unique_name(node.output[index] if len(node.output) > index else node_label(node))

    def unique_name(self, onnx_name: str) -> str:
        base = mil_name(onnx_name)
        name, n = base, 1
        while name in self._names:
            name, n = f"{base}_{n}", n + 1
        self._names.add(name)
        return name

    def reserve(self, name: str) -> None:
        self._names.add(name)

    def dtype_of(self, name: str) -> str:
        """MIL dtype name of an input value ('fp32', 'int32', 'bool', ...)."""
        value = self.value(name)
        if isinstance(value, np.ndarray):
            return str(self.types.builtin_to_string(self.types.numpy_type_to_builtin_type(value.dtype)))
        return str(self.types.builtin_to_string(value.dtype))


LowerFn = Callable[[Lowering, onnx.NodeProto], Sequence[Any]]


@dataclass
class LoweredProgram:
    program: Any
    #: ONNX output name -> MIL output var name, in graph output order
    output_names: dict[str, str]
    #: ONNX input name -> MIL input name
    input_names: dict[str, str]
    #: ONNX names of the scalar (rank-0) inputs and outputs, carried as shape [1] in the ML Program
    rank0_inputs: list[str] = field(default_factory=list)
    rank0_outputs: list[str] = field(default_factory=list)


def lower_graph(
    graph: FoldedGraph,
    table: dict[str, LowerFn],
    opset_version: Any,
    quantization: QuantizationPlan | None = None,
) -> LoweredProgram:
    """Lower every node of `graph` with `table`.

    Raises LoweringFailed listing every node that cannot be lowered (nodes fed only by those are
    skipped, not blamed), or NotLowerable for a graph input an ML Program cannot take.
    """
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import Function, Program, get_new_symbol, types

    placeholders: dict[str, Any] = {}
    input_names: dict[str, str] = {}
    symbols: dict[str, Any] = {}
    taken: set[str] = set()
    for info in graph.inputs:
        if info.elem_type not in BOUNDARY_DTYPES:
            raise NotLowerable(
                f"input {info.name} has type {info.dtype_name}, which an ML Program cannot take"
            )
        # ML Program inputs have rank 1 or more: a scalar travels as shape [1] and is reshaped inside
        shape = [d if isinstance(d, int) else symbols.setdefault(d, get_new_symbol()) for d in info.shape]
        shape = shape or [1]
        # `a.b` and `a_b` both sanitise to `a_b`: the second input gets a suffix, as outputs do
        base = mil_name(info.name)
        name, n = base, 1
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        input_names[info.name] = name
        dtype = types.string_to_builtin(BOUNDARY_DTYPES[info.elem_type])
        placeholders[name] = mb.placeholder(shape=shape, dtype=dtype)

    program = Program()
    with Function(placeholders, opset_version=opset_version) as function:
        lw = Lowering(
            mb=mb,
            types=types,
            opset=graph.opset,
            constants=graph.constants,
            consumers=_consumers(graph),
            quantization=quantization or QuantizationPlan(),
            elem_types=graph.elem_types,
        )
        scalar_inputs = {info.name for info in graph.inputs if not info.shape}
        for onnx_name, name in input_names.items():
            lw.reserve(name)
            placeholder = function.inputs[name]
            lw.values[onnx_name] = (
                mb.squeeze(x=placeholder, axes=[0], name=lw.unique_name(f"{name}_scalar"))
                if onnx_name in scalar_inputs
                else placeholder
            )
        for const_name, value in graph.constants.items():
            lw.values[const_name] = as_mil_array(value)
        failures = _lower_nodes(lw, graph, table)
        if failures:
            raise LoweringFailed(failures)
        outputs, output_names, scalar_outputs = _graph_outputs(lw, graph, set(placeholders.values()))
        function.set_outputs(outputs)
    program.add_function("main", function)
    return LoweredProgram(
        program=program,
        output_names=output_names,
        input_names=input_names,
        rank0_inputs=sorted(scalar_inputs),
        rank0_outputs=[info.name for info in graph.outputs if info.name in scalar_outputs],
    )


def _consumers(graph: FoldedGraph) -> dict[str, list[str]]:
    readers: dict[str, list[str]] = {}
    for node in graph.nodes:
        for name in node.input:
            readers.setdefault(name, []).append(node.op_type)
    for info in graph.outputs:
        readers.setdefault(info.name, []).append("output")
    return readers


def _lower_nodes(lw: Lowering, graph: FoldedGraph, table: dict[str, LowerFn]) -> list[Unlowered]:
    failures: list[Unlowered] = []
    unavailable: set[str] = set()
    for node in graph.nodes:
        op_type = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        lower = table.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if any(name in unavailable for name in node.input):
            # Fed by a node that failed: its attributes cannot be checked, but a missing op type can.
            if lower is None:
                failures.append(Unlowered(op_type, node_label(node), NO_LOWERING))
            unavailable.update(node.output)
            continue
        try:
            if lower is None:
                raise NotLowerable(NO_LOWERING)
            results = held_as_onnx_types(lw, node, lower(lw, node))
        except NotLowerable as exc:
            failures.append(Unlowered(op_type, node_label(node), str(exc)))
            unavailable.update(node.output)
            continue
        except (ValueError, TypeError, IndexError, AssertionError, NotImplementedError) as exc:
            # MIL's type inference rejected what the lowering built: shapes or dtypes that do not fit.
            failures.append(Unlowered(op_type, node_label(node), f"MIL rejected it: {exc}"))
            unavailable.update(node.output)
            continue
        for out_name, result in zip(node.output, results, strict=False):
            if out_name:
                lw.values[out_name] = as_mil_array(result) if isinstance(result, np.ndarray) else result
    return failures


def held_as_onnx_types(lw: Lowering, node: onnx.NodeProto, results: Sequence[Any]) -> Sequence[Any]:
    """`results`, each output ONNX types as a narrow float (bfloat16, float8) rounded to it."""
    if node.op_type in EXACT_OPS:
        return results
    held = list(results)
    for index, (name, value) in enumerate(zip(node.output, results, strict=False)):
        fmt = NARROW_FLOATS.get(lw.elem_types.get(name, 0))
        if fmt is None:
            continue
        if node.op_type not in ROUNDED_ONCE_OPS:
            raise NotLowerable(
                f"{node.op_type} on {fmt.name}: ONNX rounds each of its steps to {fmt.name}, "
                "the lowering computes them in fp32 and rounds once"
            )
        if isinstance(value, np.ndarray):
            narrow = onnx.helper.tensor_dtype_to_np_dtype(lw.elem_types[name])
            held[index] = value.astype(narrow).astype(np.float32)
            continue
        if lw.types.builtin_to_string(value.dtype) != "fp32":
            value = lw.mb.cast(x=value, dtype="fp32")
        held[index] = round_to_format(
            lw.mb, value, fmt, saturate=False, name=lw.unique_name(f"{name}_{fmt.name}")
        )
    return held


def _graph_outputs(
    lw: Lowering, graph: FoldedGraph, placeholders: set[Any]
) -> tuple[list[Any], dict[str, str], set[str]]:
    outputs: list[Any] = []
    names: dict[str, str] = {}
    scalars: set[str] = set()
    for info in graph.outputs:
        value = lw.value(info.name)
        name = mil_name(info.name)
        if len(value.shape) == 0:
            # ML Program outputs have rank 1 or more, as inputs do: a scalar leaves as shape [1]
            value = lw.mb.expand_dims(x=lw.var(info.name), axes=[0], name=lw.unique_name(info.name))
            scalars.add(info.name)
        # A MIL function output must be a distinct op output with the output's name.
        elif isinstance(value, np.ndarray) or value in outputs or value.name != name or value in placeholders:
            value = lw.mb.identity(x=lw.var(info.name), name=lw.unique_name(info.name))
        outputs.append(value)
        names[info.name] = value.name
    return outputs, names, scalars
