"""ExecuTorch targets: the checkpoint lowered to a `.pte` program (extra `ondevice-farm[executorch]`).

    ExportedProgram -> to_edge_transform_and_lower(partitioner=[XnnpackPartitioner()]) -> to_executorch()

`executorch/xnnpack` hands what XNNPACK takes to its delegate; what it leaves runs on ExecuTorch's
portable kernels (the fallbacks). `executorch/portable` lowers nothing: every op on a portable
kernel. The report counts both per op from the lowered graph itself: the nodes inside each
delegate call's subgraph, and the edge ops left beside them. An ETRecord is written beside the
artifact (`model.pte.etrecord`), so the host runner's Inspector can name the ops it profiles.
"""

from __future__ import annotations

import importlib
import json
import time
from collections import Counter
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.checkpoint import compile_checkpoint, io_name_map
from ondevice_farm.compile.edge_report import DelegatedGraph, edge_report
from ondevice_farm.compile.io_names import IoNameMap
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.compile.request import CompileRequest
from ondevice_farm.compile.versions import package_versions
from ondevice_farm.errors import CompileError, UsageError, install_hint
from ondevice_farm.runtimes.executorch import ETRECORD_SUFFIX, SPEC
from ondevice_farm.targets import Target
from ondevice_farm.torch_source.checkpoint import TorchCheckpoint
from ondevice_farm.torch_source.program import (
    core_aten_ops,
    exported_program,
    first_line,
    named_op,
    op_name,
    quiet_converters,
)

ARTIFACT_NAME = SPEC.artifact_name
#: the delegate's name in placements and per-op profiles; portable kernels are `portable`
XNNPACK = "XNNPACK"
PORTABLE = "portable"
#: the graph node that calls a delegate's lowered subgraph
DELEGATE_CALL = "executorch_call_delegate"


def executorch_version() -> str:
    try:
        return metadata.version("executorch")
    except metadata.PackageNotFoundError:
        return "none"


def import_executorch() -> None:
    """UsageError with the install hint where ExecuTorch is missing."""
    try:
        with quiet_converters():  # torchao reports its missing CUDA kernels on import
            importlib.import_module("executorch.exir")
    except ImportError as exc:
        raise UsageError(
            f"ExecuTorch targets need the executorch package ({exc})", hint=install_hint("executorch")
        ) from None


def etrecord_path(artifact: Path) -> Path:
    return artifact.with_name(artifact.name + ETRECORD_SUFFIX)


@dataclass
class Lowering:
    """What ExecuTorch made of the program."""

    buffer: bytes
    graph: DelegatedGraph
    delegated_subgraphs: int
    seconds: float
    etrecord: Path | None = None


def _delegated_graph(graph_module: Any) -> DelegatedGraph:
    """Every kernel of the lowered graph in execution order: the nodes inside each delegate call
    (one partition each) and the edge ops left on portable kernels."""
    graph = DelegatedGraph(PORTABLE)
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or getattr(node.target, "__name__", "") == "getitem":
            continue
        if getattr(node.target, "__name__", "") == DELEGATE_CALL:
            lowered = getattr(graph_module, str(node.args[0].target))
            inner = [
                (n.name, op_name(n.target))
                for n in lowered.original_module.graph.nodes
                if n.op == "call_function" and getattr(n.target, "__name__", "") != "getitem"
            ]
            graph.add_partition(XNNPACK, inner)
        else:
            graph.add_partition(PORTABLE, [(node.name, op_name(node.target))])
    return graph


def lower(program: Any, backend: str, etrecord: Path | None) -> Lowering:
    """The program lowered for `backend`; CompileError naming the op where ExecuTorch refuses."""
    import_executorch()
    # untyped: reached through import_module, their values are Any
    exir = importlib.import_module("executorch.exir")
    partitioners: list[Any] = []
    if SPEC.backend(backend).native == "XnnpackPartitioner":
        xnnpack = importlib.import_module("executorch.backends.xnnpack.partition.xnnpack_partitioner")
        partitioners.append(xnnpack.XnnpackPartitioner())
    started = time.perf_counter()
    stage = "to_edge_transform_and_lower"
    try:
        with quiet_converters("executorch"):
            edge = exir.to_edge_transform_and_lower(
                program, partitioner=partitioners or None, generate_etrecord=etrecord is not None
            )
            graph = _delegated_graph(edge.exported_program().graph_module)
            stage = "to_executorch"
            done = edge.to_executorch()
            buffer = bytes(done.buffer)
            if etrecord is not None:
                done.get_etrecord().save(str(etrecord))
    except Exception as exc:  # exir raises SpecViolationError, RuntimeError, KeyError ... per pass
        op = named_op(exc)
        raise CompileError(
            "ExecuTorch refused the program" + (f" at {op}" if op else "") + f" ({stage}): {first_line(exc)}",
            hint="executorch/portable takes every op that has a portable kernel; "
            "`farm compile -t ort/cpu` takes the ONNX route",
        ) from None
    return Lowering(buffer, graph, graph.delegate_calls(), time.perf_counter() - started, etrecord)


def compile_executorch(
    checkpoint: TorchCheckpoint, target: Target, out_dir: Path, shapes: dict[str, tuple[int, ...]]
) -> CompiledArtifact:
    """Compile the checkpoint for an `executorch/*` target into `<out_dir>/model.pte`."""
    if target.runtime != "executorch":
        raise UsageError(f"{target.name} is not an ExecuTorch target")
    import_executorch()
    program = exported_program(checkpoint, shapes, "ExecuTorch")
    before = core_aten_ops(program)
    out_dir.mkdir(parents=True, exist_ok=True)
    artifact = out_dir / ARTIFACT_NAME
    lowering = lower(program, target.backend, etrecord_path(artifact))
    artifact.write_bytes(lowering.buffer)
    after: Counter[str] = Counter(op for _, op in lowering.graph.fallback_nodes())
    if lowering.delegated_subgraphs:
        after[DELEGATE_CALL] = lowering.delegated_subgraphs
    report = edge_report(
        target,
        before=before,
        after=after,
        graph=lowering.graph,
        delegate=XNNPACK if SPEC.backend(target.backend).native else "",
        artifact=artifact,
        extra={
            "runtime": "executorch",
            "converter": f"executorch {executorch_version()}",
            "converter_versions": {"executorch": executorch_version(), "torch": checkpoint.torch_version},
            "partitioner": SPEC.backend(target.backend).native or "none",
            "delegated_subgraphs": lowering.delegated_subgraphs,
            "conversion_s": round(lowering.seconds, 3),
            "etrecord": lowering.etrecord is not None,
        },
    )
    return CompiledArtifact(
        target=target,
        path=artifact,
        sha256="",
        report=report,
        io_names=_io_names(checkpoint, shapes, program),
    )


def _io_names(checkpoint: TorchCheckpoint, shapes: dict[str, tuple[int, ...]], program: Any) -> IoNameMap:
    """A `.pte` method takes and returns tensors by position: inputs `input_0`, ..., outputs
    `output_0`, ... in the program's order, named for the reference like the ONNX export's."""
    outputs: list[tuple[str, str, tuple[int, ...]]] = []
    user_outputs = list(program.graph_signature.user_outputs)
    for node in program.graph.output_node().args[0]:
        value = getattr(node, "meta", {}).get("val")
        if value is not None and getattr(node, "name", None) in user_outputs:
            dims = tuple(int(d) for d in value.shape)
            outputs.append((f"output_{len(outputs)}", str(value.dtype).removeprefix("torch."), dims))
    inputs = [f"input_{i}" for i in range(len(checkpoint.inputs))]
    return io_name_map(checkpoint, shapes, inputs, outputs)


def compile_target(request: CompileRequest, store: ArtifactStore) -> CompiledArtifact:
    """The registry's entry: the checkpoint lowered, stored with its ETRecord beside it."""
    return compile_checkpoint(
        request, store, compile_executorch, json.dumps(package_versions("torch", "executorch", "torchao"))
    )
