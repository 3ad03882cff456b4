"""The ONNX model as IREE's importer is given it: the farm's shapes pinned, the opset brought to
17 where it is older (`iree-import-onnx --opset-version 17`), shapes inferred (the importer types
every value from them), every node named once (the names become the ops' locations, which is how
the report tells what each dispatch fused) and the graph named `main` (the module's entry point).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

from ondevice_farm.errors import CompileError

#: the module's function: the importer names it after the graph
ENTRY = "main"
#: what `iree-import-onnx --opset-version 17` brings an older model up to
OPSET = 17
#: characters kept in a node's name (an MLIR location is a quoted string: no quotes, no escapes)
_UNSAFE = re.compile(r"[^\w.:/@-]")


def graph_inputs(model: Any) -> list[Any]:
    """The model's real inputs: an initializer listed as an input (older exporters) is a weight."""
    weights = {init.name for init in model.graph.initializer}
    return [value for value in model.graph.input if value.name not in weights]


def node_types(model: Any) -> dict[str, str]:
    """Node name -> op type, in the graph's order."""
    return {node.name: node.op_type for node in model.graph.node}


def _pin(model: Any, shapes: dict[str, tuple[int, ...]]) -> None:
    """The farm's shape for each input it sized; an input it did not size keeps its dims (the
    importer keeps a dynamic one dynamic, and so does the module)."""
    for value in graph_inputs(model):
        shape = shapes.get(value.name)
        if shape is None:
            continue
        dims = value.type.tensor_type.shape.dim
        if len(dims) and len(dims) != len(shape):
            raise CompileError(
                f"input {value.name} has rank {len(dims)}; the farm's shape {shape} has {len(shape)}"
            )
        del dims[:]
        for size in shape:
            dims.add().dim_value = int(size)


def _name_nodes(model: Any) -> None:
    """Every node a unique name the importer can write as a location: `{op}_{i}` where it has none."""
    seen: set[str] = set()
    for index, node in enumerate(model.graph.node):
        name = _UNSAFE.sub("_", node.name) or f"{node.op_type}_{index}"
        while name in seen:
            name = f"{name}_{index}"
        seen.add(name)
        node.name = name


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:240] if text else type(exc).__name__


def _opset(model: Any) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), OPSET)


def prepared_model(path: Path, shapes: dict[str, tuple[int, ...]]) -> tuple[Any, Any]:
    """(the model as given, the model the importer takes)."""
    onnx = importlib.import_module("onnx")
    source = onnx.load(str(path))
    model = onnx.ModelProto()
    model.CopyFrom(source)
    _pin(model, shapes)
    if _opset(model) < OPSET:
        try:
            model = onnx.version_converter.convert_version(model, OPSET)
        except Exception as exc:  # the converter raises ConvertError, RuntimeError ...
            raise CompileError(
                f"ONNX's version converter could not bring opset {_opset(source)} to {OPSET} "
                f"for IREE's importer: {_first(exc)}"
            ) from None
    try:
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as exc:  # InferenceError names the node
        raise CompileError(f"ONNX shape inference failed before IREE's import: {_first(exc)}") from None
    _name_nodes(model)
    model.graph.name = ENTRY
    return source, model
