"""Ingest: check that a file is a usable ONNX model and describe its inputs and outputs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ondevice_farm.artifacts import sha256_path
from ondevice_farm.errors import ModelError

if TYPE_CHECKING:  # onnx costs an import 1-4 s (its ml_dtypes extension): loaded only to inspect
    import onnx

#: ONNX elem type (`onnx.TensorProto.DataType`, fixed by the ONNX spec) -> numpy dtype name
ONNX_DTYPES: dict[int, str] = {
    1: "float32",  # FLOAT
    10: "float16",  # FLOAT16
    11: "float64",  # DOUBLE
    7: "int64",  # INT64
    6: "int32",  # INT32
    5: "int16",  # INT16
    3: "int8",  # INT8
    2: "uint8",  # UINT8
    9: "bool",  # BOOL
}
#: element types a model may return but the farm cannot generate as inputs
OUTPUT_ONLY_DTYPES: dict[int, str] = {8: "str"}  # STRING


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    #: an int per static dim, the symbol (or "?") for a dynamic one
    shape: tuple[int | str, ...]

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    def describe(self) -> str:
        return f"{self.name}: {self.dtype}[{','.join(str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class ModelInfo:
    path: Path
    sha256: str
    name: str
    opset: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    node_count: int
    op_types: dict[str, int]
    #: inputs used as Gather indices into an initializer (embeddings) -> exclusive upper bound
    index_bounds: dict[str, int] = field(default_factory=dict)


def _spec(value: onnx.ValueInfoProto, path: Path, *, output: bool = False) -> TensorSpec:
    tensor = value.type.tensor_type
    if not value.type.HasField("tensor_type"):
        raise ModelError(f"{path}: input/output {value.name!r} is not a tensor; only tensors are supported")
    dims: list[int | str] = []
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value") and dim.dim_value > 0:
            dims.append(int(dim.dim_value))
        else:
            dims.append(dim.dim_param or "?")
    dtype = ONNX_DTYPES.get(tensor.elem_type)
    if dtype is None and output:
        dtype = OUTPUT_ONLY_DTYPES.get(tensor.elem_type)
    if dtype is None:
        import onnx

        name = onnx.TensorProto.DataType.Name(tensor.elem_type)
        raise ModelError(f"{path}: tensor {value.name!r} has unsupported element type {name}")
    return TensorSpec(value.name, dtype, tuple(dims))


def _index_bounds(model: onnx.ModelProto) -> dict[str, int]:
    sizes = {init.name: list(init.dims) for init in model.graph.initializer}
    bounds: dict[str, int] = {}
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) == 2 and node.input[0] in sizes:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            dims = sizes[node.input[0]]
            if dims:
                bound = dims[axis]
                bounds[node.input[1]] = min(bound, bounds.get(node.input[1], bound))
    return bounds


def load_model(path: Path) -> onnx.ModelProto:
    if not path.exists():
        raise ModelError(f"{path}: no such file")
    if path.is_dir():
        raise ModelError(f"{path}: is a directory, not an .onnx file")
    import onnx

    try:
        return onnx.load(str(path))
    except Exception as exc:  # protobuf raises DecodeError and friends
        raise ModelError(f"{path}: not a readable ONNX model ({type(exc).__name__})") from None


def inspect_model(path: Path) -> ModelInfo:
    """Load, check (onnx.checker, shape inference) and describe a model; raise ModelError if unusable."""
    import onnx
    from onnx import shape_inference

    model = load_model(path)
    if not model.graph.node:
        raise ModelError(f"{path}: the file parses but holds no graph nodes; is it an ONNX model?")
    try:
        onnx.checker.check_model(str(path) if path.stat().st_size > 2**30 else model, full_check=False)
        shape_inference.infer_shapes(model, strict_mode=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: fails the ONNX checker: {first_line}") from None
    initializers = {init.name for init in model.graph.initializer}
    inputs = tuple(_spec(v, path) for v in model.graph.input if v.name not in initializers)
    outputs = tuple(_spec(v, path, output=True) for v in model.graph.output)
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    return ModelInfo(
        path=path,
        sha256=sha256_path(path),
        name=path.stem,
        opset=opset,
        inputs=inputs,
        outputs=outputs,
        node_count=len(model.graph.node),
        op_types=dict(Counter(node.op_type for node in model.graph.node)),
        index_bounds=_index_bounds(model),
    )
