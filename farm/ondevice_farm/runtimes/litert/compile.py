"""LiteRT targets: the checkpoint converted to a `.tflite` flatbuffer (extra `ondevice-farm[litert]`).

    module -> litert_torch.convert(module, sample_args) -> .tflite

Both `litert/*` targets ship the same flatbuffer; the backend is the interpreter's choice at load:
`litert/xnnpack` applies the XNNPACK delegate (LiteRT's default), `litert/cpu` runs every op on
LiteRT's builtin kernels. Which nodes XNNPACK takes is read from the interpreter itself: the
model's nodes without the delegate against the delegate kernel nodes the interpreter adds once it
applies XNNPACK: each stands for the nodes between the tensors it consumes and those it produces.
"""

from __future__ import annotations

import importlib
import json
import time
from collections import Counter
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
from ondevice_farm.runtimes.litert import SPEC
from ondevice_farm.targets import Target
from ondevice_farm.torch_source.checkpoint import TorchCheckpoint
from ondevice_farm.torch_source.program import (
    core_aten_ops,
    exported_program,
    first_line,
    named_op,
    quiet_converters,
    sample_args,
)

ARTIFACT_NAME = SPEC.artifact_name
BUILTIN = "builtin"
XNNPACK = SPEC.backend("xnnpack").native
#: the op name the interpreter gives a delegate's kernel node
DELEGATE_OP = "DELEGATE"


def litert_versions() -> dict[str, str]:
    versions = {}
    for name in ("litert-torch", "litert-converter", "ai-edge-litert"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "none"
    return versions


def import_litert() -> None:
    """UsageError with the install hint where the converter or the interpreter is missing."""
    try:
        with quiet_converters():
            importlib.import_module("ai_edge_litert.interpreter")
            importlib.import_module("litert_torch")
    except ImportError as exc:
        raise UsageError(
            f"LiteRT targets need litert-torch and ai-edge-litert ({exc})", hint=install_hint("litert")
        ) from None


def convert(
    checkpoint: TorchCheckpoint, program: Any, shapes: dict[str, tuple[int, ...]], out: Path
) -> float:
    """Write the `.tflite`; CompileError naming the op where the converter refuses. Seconds taken."""
    litert_torch = importlib.import_module("litert_torch")  # untyped: its values are Any
    started = time.perf_counter()
    try:
        with quiet_converters("litert_torch", "jax", "absl"):
            model = litert_torch.convert(program.module(), sample_args(checkpoint, shapes))
            model.export(str(out))
    except Exception as exc:  # the converter raises per stage: lowering, MLIR, flatbuffer
        op = named_op(exc)
        raise CompileError(
            "litert-torch refused the program" + (f" at {op}" if op else "") + f": {first_line(exc)}",
            hint="`farm compile -t executorch/portable` or `-t ort/cpu` may take the model",
        ) from None
    return time.perf_counter() - started


def interpreter(path: Path, delegate: bool) -> Any:
    """An interpreter with its tensors allocated: the delegate is applied (its kernel nodes added)
    when the tensors are, so a plan read before would show none."""
    litert = importlib.import_module("ai_edge_litert.interpreter")
    resolver = (
        litert.OpResolverType.AUTO if delegate else litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    )
    loaded = litert.Interpreter(model_path=str(path), experimental_op_resolver_type=resolver)
    loaded.allocate_tensors()
    return loaded


def _node_name(detail: dict[str, Any]) -> str:
    return f"{detail['op_name']}_{detail['index']}"


def _delegated_nodes(plain: list[dict[str, Any]], delegate_node: dict[str, Any]) -> set[int]:
    """The nodes one delegate kernel stands for: walking back from the tensors it produces to the
    tensors it consumes, every node on the way (the delegate computes them all)."""
    producer = {int(t): int(d["index"]) for d in plain for t in d["outputs"]}
    boundary = {int(t) for t in delegate_node["inputs"]}
    taken: set[int] = set()
    pending = [int(t) for t in delegate_node["outputs"]]
    while pending:
        tensor = pending.pop()
        node = producer.get(tensor)
        if tensor in boundary or node is None or node in taken:
            continue
        taken.add(node)
        pending.extend(int(t) for t in plain[node]["inputs"] if int(t) >= 0)
    return taken


def delegated_graph(path: Path, delegate: bool) -> DelegatedGraph:
    """The flatbuffer's nodes in order, each on XNNPACK or builtin kernels as the interpreter
    plans them with (`delegate`) or without the XNNPACK delegate."""
    with quiet_converters():
        plain = list(interpreter(path, delegate=False)._get_ops_details())
        applied = list(interpreter(path, delegate=True)._get_ops_details()) if delegate else []
    owner: dict[int, int] = {}
    for number, node in enumerate(d for d in applied if d["op_name"] == DELEGATE_OP):
        owner.update(dict.fromkeys(_delegated_nodes(plain, node), number))
    graph = DelegatedGraph(BUILTIN)
    run: list[tuple[str, str]] = []
    current: int | None = None
    for detail in plain:
        index = int(detail["index"])
        if owner.get(index) != current and run:  # a delegate partition ends
            graph.add_partition(XNNPACK, run)
            run = []
        current = owner.get(index)
        if current is None:
            graph.add_partition(BUILTIN, [(_node_name(detail), str(detail["op_name"]))])
        else:
            run.append((_node_name(detail), str(detail["op_name"])))
    if run:
        graph.add_partition(XNNPACK, run)
    return graph


def output_features(path: Path) -> list[tuple[str, str, tuple[int, ...]]]:
    """(signature output name, dtype, shape) in the model's order."""
    details = interpreter(path, delegate=False).get_signature_runner().get_output_details()
    return [
        (name, str(details[name]["dtype"].__name__), tuple(int(d) for d in details[name]["shape"]))
        for name in sorted(details, key=_argument_position)
    ]


def input_features(path: Path) -> list[str]:
    """The signature's input names in argument order."""
    details = interpreter(path, delegate=False).get_signature_runner().get_input_details()
    return sorted(details, key=_argument_position)


def _argument_position(name: str) -> tuple[int, str]:
    """`args_10` -> (10, ...): litert-torch numbers its signature names; text order would put 10 before 2."""
    tail = name.rsplit("_", 1)[-1]
    return (int(tail) if tail.isdigit() else 1 << 30, name)


def compile_litert(
    checkpoint: TorchCheckpoint, target: Target, out_dir: Path, shapes: dict[str, tuple[int, ...]]
) -> CompiledArtifact:
    """Compile the checkpoint for a `litert/*` target into `<out_dir>/model.tflite`."""
    if target.runtime != "litert":
        raise UsageError(f"{target.name} is not a LiteRT target")
    import_litert()
    out_dir.mkdir(parents=True, exist_ok=True)
    artifact = out_dir / ARTIFACT_NAME
    program = exported_program(checkpoint, shapes, "LiteRT")
    before = core_aten_ops(program)
    seconds = convert(checkpoint, program, shapes, artifact)
    delegate = SPEC.backend(target.backend).native
    graph = delegated_graph(artifact, delegate=bool(delegate))
    # what the interpreter calls: one kernel per delegate partition, the builtin ones left beside
    after: Counter[str] = Counter(op for _, op in graph.fallback_nodes())
    if graph.delegate_calls():
        after[DELEGATE_OP] = graph.delegate_calls()
    io_names: IoNameMap = io_name_map(checkpoint, shapes, input_features(artifact), output_features(artifact))
    report = edge_report(
        target,
        before=before,
        after=after,
        graph=graph,
        delegate=delegate,
        artifact=artifact,
        extra={
            "runtime": "litert",
            "converter": f"litert-torch {litert_versions()['litert-torch']}",
            "converter_versions": {**litert_versions(), "torch": checkpoint.torch_version},
            "delegated_subgraphs": graph.delegate_calls(),
            # the flatbuffer's builtin ops, whichever kernels run them
            "tflite_ops": dict(sorted(Counter(op for _, op, _ in graph.nodes()).items())),
            "conversion_s": round(seconds, 3),
        },
    )
    return CompiledArtifact(target=target, path=artifact, sha256="", report=report, io_names=io_names)


def compile_target(request: CompileRequest, store: ArtifactStore) -> CompiledArtifact:
    """The registry's entry: the checkpoint converted, stored."""
    return compile_checkpoint(
        request,
        store,
        compile_litert,
        json.dumps(package_versions("torch", "litert-torch", "ai-edge-litert")),
    )
