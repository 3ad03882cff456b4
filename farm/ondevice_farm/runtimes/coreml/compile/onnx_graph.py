"""Reading the ONNX side: load and check the model, its opset, its inputs and node attributes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from ondevice_farm.errors import ModelError
from ondevice_farm.runtimes.coreml.compile.narrow_floats import HELD_IN_FP32_NAMES
from ondevice_farm.runtimes.coreml.compile.pinning import check_pinned_names, pinned_array

#: the opsets the lowering is written and tested against
MIN_OPSET = 13
MAX_OPSET = 21

#: ONNX's 4-bit and 2-bit integers (numpy dtypes from ml_dtypes): held in int32 in an ML Program
SUB_BYTE_INTS = frozenset({"int4", "uint4", "int2", "uint2"})

#: a dimension is a size, or a name (dim_param) where the model leaves it free
Dim = int | str


@dataclass(frozen=True)
class TensorInfo:
    name: str
    #: ONNX TensorProto data type (e.g. TensorProto.FLOAT)
    elem_type: int
    shape: tuple[Dim, ...]

    @property
    def dtype_name(self) -> str:
        return onnx_dtype_name(self.elem_type)

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)


def onnx_dtype_name(elem_type: int) -> str:
    return helper.tensor_dtype_to_np_dtype(elem_type).name if elem_type else "undefined"


def load_onnx(path: Path) -> onnx.ModelProto:
    """The model at `path`, checked; a ModelError that says what is wrong otherwise."""
    if not path.is_file():
        raise ModelError(f"model not found: {path}")
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # onnx raises DecodeError, ValueError, ... for garbage
        raise ModelError(f"{path} is not an ONNX model: {exc}") from exc
    if not model.graph.node and not model.graph.output:
        raise ModelError(f"{path} is not an ONNX model: it has no graph")
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid"
        raise ModelError(f"{path} fails onnx.checker: {first}") from exc
    return model


def default_opset(model: onnx.ModelProto) -> int:
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    raise ModelError("the model imports no default ONNX opset")


def graph_inputs(model: onnx.ModelProto) -> list[TensorInfo]:
    """The real inputs: graph inputs that are not also initializers (old exporters list both)."""
    initialized = {init.name for init in model.graph.initializer}
    return [_tensor_info(vi) for vi in model.graph.input if vi.name not in initialized]


def graph_outputs(model: onnx.ModelProto) -> list[TensorInfo]:
    return [_tensor_info(vi) for vi in model.graph.output]


def _tensor_info(vi: onnx.ValueInfoProto) -> TensorInfo:
    tensor_type = vi.type.tensor_type
    dims: list[Dim] = []
    for i, dim in enumerate(tensor_type.shape.dim):
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        else:
            dims.append(dim.dim_param or f"{vi.name}_dim{i}")
    return TensorInfo(vi.name, int(tensor_type.elem_type), tuple(dims))


def node_attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """Attributes as Python values; strings decoded, tensors as numpy arrays."""
    values: dict[str, Any] = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, TensorProto):
            value = onnx.numpy_helper.to_array(value)
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode() for v in value]
        values[attr.name] = value
    return values


def node_label(node: onnx.NodeProto) -> str:
    """A node's name for messages; exporters often leave names empty."""
    return node.name or (node.output[0] if node.output else node.op_type)


def with_input_shapes(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]]) -> onnx.ModelProto:
    """A copy of `model` whose named inputs have the given static shapes."""
    known = {info.name for info in graph_inputs(model)}
    unknown = sorted(set(input_shapes) - known)
    if unknown:
        raise ModelError(
            f"input_shapes names {', '.join(unknown)}, which the model does not have",
            hint=f"the model's inputs are: {', '.join(sorted(known))}",
        )
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for vi in copy.graph.input:
        if vi.name in input_shapes:
            shape = input_shapes[vi.name]
            dims = vi.type.tensor_type.shape.dim
            if len(dims) and len(dims) != len(shape):
                raise ModelError(f"input {vi.name} has rank {len(dims)}, input_shapes gives {shape}")
            del dims[:]
            for size in shape:
                dims.add().dim_value = int(size)
    return copy


def as_mil_array(value: np.ndarray) -> np.ndarray:
    """An ONNX constant in a dtype an ML Program holds: no 64-bit types there."""
    array: np.ndarray = np.asarray(value)
    if array.dtype == np.float64 or array.dtype.name in HELD_IN_FP32_NAMES:
        # float8, bfloat16, float4 values are all fp32 values (see narrow_floats)
        return array.astype(np.float32)
    if array.dtype in (np.int64, np.uint64, np.uint32):
        info = np.iinfo(np.int32)
        # np.clip gives a numpy scalar for a 0-d array: keep it an array (a known constant)
        clipped: np.ndarray = np.asarray(np.clip(array, info.min, info.max))
        return clipped.astype(np.int32)
    if array.dtype in (np.int16, np.int8, np.uint16, np.uint8) or array.dtype.name in SUB_BYTE_INTS:
        return array.astype(np.int32)
    return array


def with_fixed_inputs(model: onnx.ModelProto, fixed: dict[str, float]) -> onnx.ModelProto:
    """A copy of `model` whose named scalar inputs are constants of the given values (`--fix`).

    A pinned input (a voice-activity model's sample rate) lets folding decide the `If`s and
    shapes that depend on it; it is no longer an input of the compiled program.
    """
    inputs = {info.name: info for info in graph_inputs(model)}
    check_pinned_names(fixed, inputs)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for name, value in fixed.items():
        info = inputs[name]
        pinned = pinned_array(name, value, info.shape, helper.tensor_dtype_to_np_dtype(info.elem_type))
        copy.graph.initializer.append(onnx.numpy_helper.from_array(pinned, name))
    kept = [vi for vi in copy.graph.input if vi.name not in fixed]
    del copy.graph.input[:]
    copy.graph.input.extend(kept)
    return copy
