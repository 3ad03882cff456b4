"""IREE targets: an ONNX model compiled ahead of time into one `.vmfb` module (extra `ondevice-farm[iree]`).

    onnx (shapes pinned, opset >= 17) -> IREE's ONNX importer (torch dialect MLIR, node names
        as locations) -> iree-compile -> model.vmfb

The import is `iree-import-onnx m.onnx --opset-version 17`'s own steps, called in this process
(`iree.compiler.extras.onnx_importer`), so each op keeps its node's name as its location; the
compile is `iree.compiler.tools.compile_file`, which runs the wheel's `iree-compile` with the
flags below. The importer keeps dynamic dims: the farm's shapes are set in the ONNX model first,
so the module is built for them only (another shape is refused at the call, in one line).

`iree/cpu`: `--iree-hal-target-device=local` with the `llvm-cpu` backend for this host's CPU
(`--iree-llvmcpu-target-cpu=host`: the module uses the controller's CPU features, so it is built
for the host that compiles it, as `host-cpu` is). `iree/vulkan`: SPIR-V for the Vulkan HAL, for
the Android baseline profile (`vp_android_baseline_2022`, what every Vulkan 1.1 Android device
guarantees). Not `valhall` or `adreno`: those assume their GPU's subgroup size, and their modules
run on Mesa's lavapipe (subgroup size 8) without an error and with wrong numbers (docs/compilers.md).

The report (`report.py`) counts ONNX ops before and IREE's dispatches after, and names what each
dispatch fused (`dispatches.py`).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.cached import compile_onnx_once
from ondevice_farm.compile.io_names import Feature, IoNameMap
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.compile.request import CompileRequest
from ondevice_farm.compile.versions import package_versions
from ondevice_farm.errors import CompileError, UsageError, install_hint
from ondevice_farm.runtimes.iree import DISPATCHES_SUFFIX, SPEC
from ondevice_farm.runtimes.iree.dispatches import Dispatch, dispatch_count, read_dispatches
from ondevice_farm.runtimes.iree.onnx_source import ENTRY, graph_inputs, node_types, prepared_model
from ondevice_farm.runtimes.iree.report import report
from ondevice_farm.targets import Target
from ondevice_farm.torch_source.program import first_line

ARTIFACT_NAME = SPEC.artifact_name
#: the Vulkan target: the Android baseline profile (see the module docstring for why not valhall)
VULKAN_TARGET = "vp_android_baseline_2022"
#: iree-compile's flags per backend: the HAL device and its code generation
BACKEND_FLAGS: dict[str, tuple[str, ...]] = {
    "cpu": (
        "--iree-hal-target-device=local",
        "--iree-hal-local-target-device-backends=llvm-cpu",
        "--iree-llvmcpu-target-cpu=host",
    ),
    "vulkan": ("--iree-hal-target-device=vulkan", f"--iree-vulkan-target={VULKAN_TARGET}"),
}
HINT = "`farm compile -t ort/cpu` takes every ONNX op ONNX Runtime implements"
#: the first error of iree-compile's diagnostics: `<unknown>:0: error: loc("node"): failed to ...`
_ERROR = re.compile(r"^.*?\berror: (.+)$", re.MULTILINE)
#: the location the message starts with, and the op it prints after its text
_LOCATION = re.compile(r"^loc\((.*?)\):\s*")
_PRINTED_OP = re.compile(r":\s+%\S+ = .*$")
_QUOTED = re.compile(r'"([^"]+)"')
#: an op of the importer's output or its lowering, named in a diagnostic
_MLIR_OP = re.compile(r"'(torch\.[\w.]+)'|\bonnx\.(\w+)")


def iree_versions() -> dict[str, str]:
    return package_versions("iree-base-compiler", "iree-base-runtime", "onnx")


def import_iree() -> None:
    """UsageError with the install hint where IREE's compiler (or onnx, its importer's reader) is missing."""
    try:
        importlib.import_module("onnx")
        importlib.import_module("iree.compiler.extras.onnx_importer")
        importlib.import_module("iree.compiler.tools")
    except ImportError as exc:
        raise UsageError(
            f"IREE targets need iree-base-compiler[onnx] ({exc})", hint=install_hint(SPEC.extra)
        ) from None


def import_mlir(model: Any, out: Path) -> None:
    """The model as torch-dialect MLIR, each op located at its node's name; CompileError naming
    the node's op where the importer refuses it."""
    importer = importlib.import_module("iree.compiler.extras.onnx_importer")
    ir = importlib.import_module("iree.compiler.ir")
    try:
        info = importer.ModelInfo(model)
        module = info.create_module(context=ir.Context()).operation
        importer.NodeImporter.define_function(info.main_graph, module).import_all()
        module.verify()
        out.write_text(module.get_asm(assume_verified=True, enable_debug_info=True), encoding="utf-8")
    except Exception as exc:  # the importer raises OnnxImportError, ValueError, MLIRError ...
        op = next((t for t in node_types(model).values() if re.search(rf"\b{t}\b", str(exc))), None)
        raise CompileError(
            "IREE's ONNX importer refused the model" + (f" at {op}" if op else "") + f": {first_line(exc)}",
            hint=HINT,
        ) from None


def refusal(diagnostics: str, types: dict[str, str]) -> str:
    """One line from iree-compile's diagnostics: the ONNX op and node it refused, and why."""
    found = _ERROR.search(diagnostics)
    if found is None:
        crashed = "Stack dump" in diagnostics or "PLEASE submit a bug report" in diagnostics
        return "iree-compile crashed" if crashed else "iree-compile failed"
    line = found.group(1).strip()
    located = _LOCATION.match(line)
    where = located.group(1) if located else found.group(0)
    node = next((name for name in _QUOTED.findall(where) if name in types), None)
    message = _PRINTED_OP.sub("", line[located.end() :] if located else line)
    named = _MLIR_OP.search(message)
    op = types[node] if node else (named.group(1) or named.group(2) if named else None)
    at = (f" at {op}" + (f" (node {node})" if node else "")) if op else ""
    return f"iree-compile refused the model{at}: {message[:240]}"


@dataclass(frozen=True)
class Compiled:
    """What `iree-compile` built, and what it dumped beside it."""

    flags: tuple[str, ...]
    dispatches: list[Dispatch]
    dispatch_count: int
    seconds: float


def compile_module(mlir: Path, artifact: Path, backend: str, types: dict[str, str]) -> Compiled:
    """`iree-compile` for the backend, with the dumps the report reads; CompileError in one line."""
    tools = importlib.import_module("iree.compiler.tools")
    statistics = mlir.with_name("statistics.json")
    sources = mlir.with_name("sources")
    flags = BACKEND_FLAGS[backend]
    dumps = (
        "--iree-scheduling-dump-statistics-format=json",
        f"--iree-scheduling-dump-statistics-file={statistics}",
        f"--iree-hal-dump-executable-sources-to={sources}",
    )
    started = time.perf_counter()
    try:
        tools.compile_file(str(mlir), extra_args=[*flags, *dumps], output_file=str(artifact))
    except tools.CompilerToolError as exc:
        raise CompileError(refusal(str(exc), types), hint=HINT) from None
    seconds = time.perf_counter() - started
    return Compiled(flags, read_dispatches(sources, types), dispatch_count(statistics), seconds)


def output_features(model: Any) -> list[Feature]:
    """The outputs in the model's order with their inferred shapes (-1 where inference left a dim)."""
    helper = importlib.import_module("onnx.helper")
    features = []
    for value in model.graph.output:
        tensor = value.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim)
        features.append(
            Feature(value.name, value.name, helper.tensor_dtype_to_np_dtype(tensor.elem_type).name, dims)
        )
    return features


def input_features(model: Any) -> list[Feature]:
    helper = importlib.import_module("onnx.helper")
    return [
        Feature(
            v.name,
            v.name,
            helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type).name,
            # a dim the farm did not pin stays dynamic in the module: -1
            tuple(d.dim_value if d.HasField("dim_value") else -1 for d in v.type.tensor_type.shape.dim),
        )
        for v in graph_inputs(model)
    ]


def compile_iree(
    model_path: Path,
    target: Target,
    out_dir: Path,
    shapes: dict[str, tuple[int, ...]],
    source: str = "the ONNX model",
) -> CompiledArtifact:
    """Compile the ONNX model for an `iree/*` target into `<out_dir>/model.vmfb` (its dispatches
    beside it); not stored."""
    if target.runtime != SPEC.name:
        raise UsageError(f"{target.name} is not an IREE target")
    import_iree()
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    source_model, model = prepared_model(model_path, shapes)
    types = node_types(model)
    mlir = out_dir / "model.mlir"
    import_mlir(model, mlir)
    import_s = time.perf_counter() - started
    artifact = out_dir / ARTIFACT_NAME
    compiled = compile_module(mlir, artifact, target.backend, types)
    Path(str(artifact) + DISPATCHES_SUFFIX).write_text(
        json.dumps([d.as_json() for d in compiled.dispatches], indent=1) + "\n", encoding="utf-8"
    )
    extra = {
        "runtime": SPEC.name,
        "converter": f"iree-compile {iree_versions()['iree-base-compiler']} (IREE's ONNX importer)",
        "converter_versions": iree_versions(),
        "source": source,
        "entry_function": ENTRY,
        "iree_compile_flags": list(compiled.flags),
        "input_shapes": {f.onnx_name: list(f.shape) for f in input_features(model)},
        "import_s": round(import_s, 3),
        "compile_s": round(compiled.seconds, 3),
        "conversion_s": round(time.perf_counter() - started, 3),
    }
    return CompiledArtifact(
        target=target,
        path=artifact,
        sha256="",
        report=report(
            target, source_model, types, compiled.dispatches, compiled.dispatch_count, artifact, extra
        ),
        io_names=IoNameMap(tuple(input_features(model)), tuple(output_features(model))),
    )


def compile_target(request: CompileRequest, store: ArtifactStore) -> CompiledArtifact:
    """The registry's entry: the ONNX model (a checkpoint's ONNX export) compiled, stored with its
    dispatches and I/O map beside it, and kept by what decides it."""
    # iree/cpu is built for this host's CPU (`--iree-llvmcpu-target-cpu=host`): the CPU is part
    # of what decides the module, so a farm directory shared by two machines compiles for each
    machine = {"host_cpu": host_cpu_identity()} if request.target.backend == "cpu" else {}
    return compile_onnx_once(
        request, store, compile_iree, json.dumps({**iree_versions(), **machine}, sort_keys=True)
    )


def host_cpu_identity() -> str:
    """This machine's CPU as the kernel names it (its model and its feature flags)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    wanted = ("model name", "flags", "Features", "CPU part")
    lines = sorted({line.strip() for line in text.splitlines() if line.split(":")[0].strip() in wanted})
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
