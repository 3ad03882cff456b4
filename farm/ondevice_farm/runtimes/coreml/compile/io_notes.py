"""The compile report's notes on a CoreML program's inputs and outputs: where their types, names
or ranks differ from the ONNX model's, and the ONNX name and shape each spec entry stands for."""

from __future__ import annotations

from typing import Any

from ondevice_farm.runtimes.coreml.compile.fold import FoldedGraph
from ondevice_farm.runtimes.coreml.compile.lowering import LoweredProgram
from ondevice_farm.runtimes.coreml.compile.narrow_floats import HELD_IN_FP32
from ondevice_farm.runtimes.coreml.compile.onnx_graph import SUB_BYTE_INTS


def retyped_inputs(graph: FoldedGraph, io: dict[str, list[dict[str, Any]]]) -> list[str]:
    """A note for each input (and sub-byte or narrow float output) whose type the ML Program changes."""
    notes = []
    for info, entry in zip(graph.inputs, io["inputs"], strict=True):
        if info.dtype_name in ("int64", "float64"):
            notes.append(
                f"input {info.name} is {info.dtype_name} in ONNX and {entry['dtype']} "
                "in the ML Program, which holds no 64-bit tensors"
            )
        elif info.dtype_name in ("uint16", "uint32", "uint64"):
            notes.append(
                f"input {info.name} is {info.dtype_name} in ONNX and {entry['dtype']} in the ML Program, "
                "which holds no unsigned tensors: values above 2**31-1 do not survive the cast"
            )
        elif info.dtype_name in SUB_BYTE_INTS:
            notes.append(
                f"input {info.name} is {info.dtype_name} in ONNX and {entry['dtype']} in the ML Program "
                "(its values are exact there; the input takes 4 or 16 times the memory)"
            )
        elif info.elem_type in HELD_IN_FP32:
            notes.append(
                f"input {info.name} is {info.dtype_name} in ONNX and fp32 in the ML Program "
                "(its values are exact there; feed them widened to fp32)"
            )
    for info in graph.outputs:
        if info.dtype_name in SUB_BYTE_INTS:
            notes.append(f"output {info.name} is {info.dtype_name} in ONNX and int32 in the ML Program")
        elif info.elem_type in HELD_IN_FP32:
            notes.append(
                f"output {info.name} is {info.dtype_name} in ONNX and fp32 in the ML Program: computed "
                f"in fp32 and rounded to {info.dtype_name}'s values by elementwise ops"
            )
    return notes


def named_as_onnx(graph: FoldedGraph, io: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Give each input/output entry its ONNX name; a note where CoreML's differs (e.g. `input.1`)."""
    notes = []
    for kind, infos in (("inputs", graph.inputs), ("outputs", graph.outputs)):
        for entry, info in zip(io[kind], infos, strict=True):
            entry["onnx_name"] = info.name
            if entry["name"] != info.name:
                notes.append(f"{kind[:-1]} {info.name!r} is named {entry['name']!r} in the ML Program")
    return notes


def scalar_notes(
    graph: FoldedGraph, io: dict[str, list[dict[str, Any]]], lowered: LoweredProgram
) -> list[str]:
    """Give each entry its ONNX shape; a note for each scalar carried as shape [1].

    A job feeds a rank-0 ONNX input reshaped to [1] and reads a rank-0 output back as a scalar:
    `extra["rank0"]` lists them by ONNX name, each entry's `onnx_shape` is the ONNX one.
    """
    scalars = {"inputs": set(lowered.rank0_inputs), "outputs": set(lowered.rank0_outputs)}
    notes = []
    for kind, infos in (("inputs", graph.inputs), ("outputs", graph.outputs)):
        for entry, info in zip(io[kind], infos, strict=True):
            entry["onnx_shape"] = list(info.shape)
            if info.name in scalars[kind]:
                entry["rank0"] = True
                notes.append(
                    f"{kind[:-1]} {info.name!r} is a scalar in ONNX and shape [1] in the ML Program "
                    "(reshaped inside the program)"
                )
    return notes
