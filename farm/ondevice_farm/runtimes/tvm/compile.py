"""TVM targets: an ONNX model compiled ahead of time into one shared library (extra `ondevice-farm[tvm]`).

    onnx -> tvm.relax.frontend.onnx.from_onnx(shapes pinned) -> tvm.compile(relax_pipeline=
        relax.get_default_pipeline(target)) -> export_library -> model.so

The pipeline is TVM's per-target default (`relax.get_default_pipeline`), not `tvm.compile`'s own
default build: that build runs `LegalizeOps` and no `FuseOps`, so on an `llvm` target every Relax
op stays a kernel of its own (checked 2026-12-05: 11 kernel calls for a small CNN, against 5
with this pipeline). The report says how many kernel calls fusion left and which ops each kernel
fused (`kernels.py`; docs/compilers.md has the farm's figures). The kernels are TVM's untuned
TIR: MetaSchedule did not work with these wheels here, so nothing is tuned for the CPU.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.cached import compile_onnx_once
from ondevice_farm.compile.io_names import Feature, IoNameMap
from ondevice_farm.compile.precision import dominant, precision_of, source_op_precision, summarise
from ondevice_farm.compile.report import (
    CompiledArtifact,
    CompileReport,
    OpCountChange,
    op_count_changes,
)
from ondevice_farm.compile.request import CompileRequest
from ondevice_farm.compile.versions import package_versions
from ondevice_farm.errors import CompileError, UsageError, install_hint
from ondevice_farm.inputs import DEFAULT_DYNAMIC_DIM
from ondevice_farm.runtimes.tvm import KERNELS_SUFFIX, LLVM, SPEC
from ondevice_farm.runtimes.tvm.kernels import (
    Kernel,
    built_kernels,
    fusions_named,
    kernels_before_fusion,
    op_groups,
)
from ondevice_farm.runtimes.tvm.machines import HOST, Machine
from ondevice_farm.targets import Target
from ondevice_farm.torch_source.program import first_line, quiet_converters

ARTIFACT_NAME = SPEC.artifact_name
PIPELINE = "relax.get_default_pipeline(target): LegalizeOps, FoldConstant, FuseOps, FuseTIR"
PIPELINE_REASON = (
    "tvm.compile's default build applies no operator fusion on an llvm target (LegalizeOps only): "
    "every op a kernel; the target's default pipeline fuses (FuseOps, FuseTIR)"
)
#: what the frontend prints before it re-raises a converter's error
_CONVERTING = re.compile(r"Error converting operator (\w+)")
#: what the frontend's own check raises for ops it has no converter for
_UNSUPPORTED = re.compile(r"not supported for frontend ONNX: (.+)")
#: a Relax op named in a build error (`relax.nn.conv2d`)
_RELAX_OP = re.compile(r"\brelax\.[A-Za-z0-9_.]+")
HINT = "`farm compile -t ort/cpu` takes every ONNX op ONNX Runtime implements"


def tvm_versions() -> dict[str, str]:
    return package_versions("apache-tvm", "apache-tvm-ffi", "onnx")


def import_tvm() -> None:
    """UsageError with the install hint where TVM (or onnx, its frontend's reader) is missing; an
    apache-tvm-ffi whose ABI TVM's library does not load raises OSError or ImportError alike."""
    try:
        with quiet_converters():
            importlib.import_module("onnx")
            importlib.import_module("tvm.relax.frontend.onnx")
    except (ImportError, OSError) as exc:
        raise UsageError(
            f"TVM targets need apache-tvm and onnx ({exc})", hint=install_hint(SPEC.extra)
        ) from None


@dataclass(frozen=True)
class Build:
    """What TVM built, and the module at the points of its pipeline the report reads."""

    executable: Any
    #: the target as TVM resolved it (LLVM's triple filled in)
    target: dict[str, Any]
    legalized: Any
    entering_fusion: Any
    fused: Any
    final: Any
    seconds: float


def graph_inputs(model: Any) -> list[Any]:
    """The model's real inputs: an initializer listed as an input (older exporters) is a weight."""
    weights = {init.name for init in model.graph.initializer}
    return [value for value in model.graph.input if value.name not in weights]


def pinned_shapes(model: Any, shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Each input's shape: the farm's where it sized one, else the model's static dims (a dynamic
    one at the farm's default size): the artifact is built for these shapes only."""
    out = {}
    for value in graph_inputs(model):
        dims = value.type.tensor_type.shape.dim
        static = tuple(d.dim_value if d.HasField("dim_value") else DEFAULT_DYNAMIC_DIM for d in dims)
        out[value.name] = tuple(shapes.get(value.name, static))
    return out


def _dtype(elem_type: int) -> str:
    return str(importlib.import_module("onnx.helper").tensor_dtype_to_np_dtype(elem_type).name)


def relax_module(model: Any, shapes: dict[str, tuple[int, ...]]) -> Any:
    """The model as a Relax module, shapes pinned; CompileError naming the op the frontend refused."""
    frontend = importlib.import_module("tvm.relax.frontend.onnx")
    dtypes = {v.name: _dtype(v.type.tensor_type.elem_type) for v in graph_inputs(model)}
    printed = io.StringIO()
    try:
        with quiet_converters("tvm"), contextlib.redirect_stdout(printed):
            return frontend.from_onnx(
                model, shape_dict={k: list(v) for k, v in shapes.items()}, dtype_dict=dtypes
            )
    except Exception as exc:  # OpNotImplemented, or whatever a converter raised (TVMError, ...)
        unsupported = _UNSUPPORTED.search(str(exc))
        converting = _CONVERTING.search(printed.getvalue())
        op = unsupported.group(1) if unsupported else (converting.group(1) if converting else None)
        reason = "has no converter for it" if unsupported else first_line(exc)
        raise CompileError(
            "TVM's Relax ONNX frontend refused the model" + (f" at {op}" if op else "") + f": {reason}",
            hint=HINT,
        ) from None


def build(module: Any, target_json: dict[str, Any]) -> Build:
    """`tvm.compile` with the target's default pipeline, the module captured where the report
    reads it; CompileError naming the Relax op where a stage refuses."""
    tvm = importlib.import_module("tvm")
    relax = importlib.import_module("tvm.relax")
    captured: dict[str, Any] = {}

    class Capture:  # TVM calls these around every pass of the pipeline
        def run_before_pass(self, mod: Any, info: Any) -> None:
            if info.name == "FuseOps":
                captured["entering_fusion"] = mod

        def run_after_pass(self, mod: Any, info: Any) -> None:
            stage = {"LegalizeOps": "legalized", "FuseOps": "fused", "RewriteDataflowReshape": "final"}
            if info.name in stage:
                captured[stage[info.name]] = mod

    target = tvm.target.Target(target_json)
    started = time.perf_counter()
    try:
        with (
            quiet_converters("tvm"),
            tvm.transform.PassContext(instruments=[tvm.instrument.pass_instrument(Capture)()]),
        ):
            executable = tvm.compile(module, target, relax_pipeline=relax.get_default_pipeline(target))
    except Exception as exc:  # TVMError, InternalError ... per pass
        op = _RELAX_OP.search(str(exc))
        raise CompileError(
            "TVM refused the model"
            + (f" at {op.group(0)}" if op else "")
            + f" (tvm.compile): {first_line(exc)}",
            hint=HINT,
        ) from None
    seconds = time.perf_counter() - started
    missing = sorted({"legalized", "entering_fusion", "fused", "final"} - set(captured))
    if missing:
        raise CompileError(
            f"TVM's pipeline for {target_json} ran no pass for {', '.join(missing)}", hint=HINT
        )
    return Build(executable, json.loads(str(target)), seconds=seconds, **captured)


def export(executable: Any, artifact: Path, machine: Machine) -> None:
    """The shared library the VM loads, linked by the machine's C++ compiler."""
    cc = importlib.import_module("tvm.support.cc")
    linker = machine.linker or "g++"
    fcompile = cc.cross_compiler(machine.linker) if machine.linker else None
    try:
        with quiet_converters("tvm"):
            executable.export_library(str(artifact), fcompile=fcompile)
    except Exception as exc:  # the linker's RuntimeError, FileNotFoundError where there is none
        raise CompileError(
            f"TVM could not link {artifact.name} for {machine.name}: {first_line(exc)}",
            hint=f"TVM links its kernels with {linker}: apt-get install {machine.linker_package}",
        ) from None


def output_features(model: Any, final: Any) -> list[Feature]:
    """The outputs in the model's order, their shapes as the built `main` returns them."""
    returned = final["main"].ret_ty
    types = list(returned.fields) if hasattr(returned, "fields") else [returned]
    return [
        Feature(value.name, value.name, str(ty.dtype), tuple(int(d) for d in ty.shape))
        for value, ty in zip(model.graph.output, types, strict=True)
    ]


def fusions(before: Counter[str], after: Counter[str], kernels: list[Kernel]) -> list[OpCountChange]:
    """The op count changes, less the kernels of one op each: every kernel name is new beside the
    ONNX op types, but only a kernel that fused ops is a fusion (the report's findings read
    each new op type as one)."""
    single = {kernel.op_type for kernel in kernels if not kernel.fused}
    return [c for c in op_count_changes(before, after) if not (c.appeared and c.op_type in single)]


def report(
    target: Target,
    model: Any,
    kernels: list[Kernel],
    built: Build,
    artifact: Path,
    extra: dict[str, Any],
) -> CompileReport:
    before: Counter[str] = Counter(node.op_type for node in model.graph.node)
    after: Counter[str] = Counter(kernel.op_type for kernel in kernels)
    op_precision = summarise(op_groups(kernels))
    fused = fusions_named(kernels)
    unfused = kernels_before_fusion(built.entering_fusion)
    return CompileReport(
        target=target.name,
        nodes_before=sum(before.values()),
        nodes_after=sum(after.values()),
        op_types_before=dict(sorted(before.items())),
        op_types_after=dict(sorted(after.items())),
        fusions=fusions(before, after, kernels),
        placement={LLVM: len(kernels)},
        node_placement={kernel.name: LLVM for kernel in kernels},
        partitions=1,
        precision=precision_of(op_precision, dominant(dict(Counter(p for _, p in op_groups(kernels))))),
        op_precision=op_precision,
        source_op_precision=source_op_precision(model),
        notes=[
            f"TVM fused {unfused} kernel calls into {len(kernels)}: "
            + (", ".join(f"{ops} x{n}" for ops, n in fused.items()) or "nothing fused")
        ],
        extra={
            "runtime": "tvm",
            "converter": f"apache-tvm {tvm_versions()['apache-tvm']} (Relax ONNX frontend)",
            "converter_versions": tvm_versions(),
            "pipeline": PIPELINE,
            "pipeline_reason": PIPELINE_REASON,
            "kernels_before_fusion": unfused,
            "kernels_after_fusion": len(kernels),
            "fused": fused,
            "kernels": [kernel.as_json() for kernel in kernels],
            "artifact_bytes": artifact.stat().st_size,
            **extra,
        },
    )


def compile_tvm(
    model_path: Path,
    target: Target,
    out_dir: Path,
    shapes: dict[str, tuple[int, ...]],
    source: str = "the ONNX model",
    machine: Machine = HOST,
) -> CompiledArtifact:
    """Compile the ONNX model for a `tvm/*` target into `<out_dir>/model.so` (and its kernels
    beside it) for `machine` (this host unless told); not stored."""
    if target.runtime != SPEC.name:
        raise UsageError(f"{target.name} is not a TVM target")
    import_tvm()
    model = importlib.import_module("onnx").load(str(model_path))
    pinned = pinned_shapes(model, shapes)
    started = time.perf_counter()
    built = build(relax_module(model, pinned), machine.target)
    out_dir.mkdir(parents=True, exist_ok=True)
    artifact = out_dir / ARTIFACT_NAME
    export(built.executable, artifact, machine)
    seconds = time.perf_counter() - started
    kernels = built_kernels(built.legalized, built.fused, built.final)
    Path(str(artifact) + KERNELS_SUFFIX).write_text(
        json.dumps([kernel.as_json() for kernel in kernels], indent=1) + "\n", encoding="utf-8"
    )
    inputs = [
        Feature(v.name, v.name, _dtype(v.type.tensor_type.elem_type), pinned[v.name])
        for v in graph_inputs(model)
    ]
    io_names = IoNameMap(tuple(inputs), tuple(output_features(model, built.final)))
    extra = {
        "tvm_target": built.target,
        "machine": machine.name,
        "source": source,
        "input_shapes": {name: list(shape) for name, shape in pinned.items()},
        "compile_s": round(built.seconds, 3),
        "conversion_s": round(seconds, 3),
    }
    return CompiledArtifact(
        target=target,
        path=artifact,
        sha256="",
        report=report(target, model, kernels, built, artifact, extra),
        io_names=io_names,
    )


def compile_target(request: CompileRequest, store: ArtifactStore) -> CompiledArtifact:
    """The registry's entry: the ONNX model (a checkpoint's ONNX export) compiled, stored with its
    kernels and I/O map beside it, and kept by what decides it."""
    # the host build targets generic x86-64 LLVM (machines.py): the versions decide the output
    return compile_onnx_once(request, store, compile_tvm, json.dumps(tvm_versions(), sort_keys=True))
