"""ONNX (or a ready .mlpackage) -> a CoreML ML Program artifact and its compile report."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from ondevice_farm.compile.io_names import Feature, IoNameMap, save_io_names
from ondevice_farm.compile.precision import precision_of, source_op_precision
from ondevice_farm.compile.report import CompiledArtifact, CompileReport, op_count_changes
from ondevice_farm.errors import CompileError, ModelError, UsageError, install_hint
from ondevice_farm.runtimes.coreml.compile.fold import FoldedGraph, fold_constants
from ondevice_farm.runtimes.coreml.compile.io_notes import named_as_onnx, retyped_inputs, scalar_notes
from ondevice_farm.runtimes.coreml.compile.lowering import (
    LoweredProgram,
    LoweringFailed,
    NotLowerable,
    Unlowered,
    lower_graph,
)
from ondevice_farm.runtimes.coreml.compile.onnx_graph import (
    MAX_OPSET,
    MIN_OPSET,
    default_opset,
    load_onnx,
    with_fixed_inputs,
    with_input_shapes,
)
from ondevice_farm.runtimes.coreml.compile.precision import INT8_NOTE, mil_op_precision, weight_bytes
from ondevice_farm.runtimes.coreml.compile.qoperator import expand_qoperators
from ondevice_farm.runtimes.coreml.compile.quantization import (
    DEFAULT_QUANTIZATION,
    QUANTIZATION_MODES,
    QuantizationPlan,
)
from ondevice_farm.runtimes.coreml.compile.report import (
    FP16_NOTE,
    PLACEMENT_NOTE,
    mil_casts,
    mil_histogram,
    package_bytes,
    spec_io,
    spec_op_histogram,
    spec_precision,
    tree_sha256,
)
from ondevice_farm.runtimes.coreml.compile.table import lowering_table
from ondevice_farm.runtimes.coreml.compile.unsupported import describe_unsupported, find_unsupported
from ondevice_farm.targets import Target

PRECISIONS = ("fp16", "fp32")
DEFAULT_PRECISION = "fp16"
DEFAULT_DEPLOYMENT_TARGET = "iOS17"
#: ML Programs need an upper bound on every flexible dim; a free ONNX dim gets [1, this]
DEFAULT_MAX_FLEXIBLE_DIM = 4096
PACKAGE_NAME = "model.mlpackage"


#: ct.target values count from iOS15 = 6 (macOS12); the iOS version is 9 more
_IOS_OFFSET = 9


@dataclass(frozen=True)
class CoreMLOptions:
    precision: str = DEFAULT_PRECISION
    minimum_deployment_target: str = DEFAULT_DEPLOYMENT_TARGET
    max_flexible_dim: int = DEFAULT_MAX_FLEXIBLE_DIM
    #: QDQ models: keep 8-bit weights and activations where the target has the ops, or fold to float
    quantization: str = DEFAULT_QUANTIZATION
    #: scalar inputs pinned to a value (`--fix NAME=VALUE`): constants before folding
    fixed_inputs: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise UsageError(
                f"unknown CoreML precision {self.precision!r}; choose one of {', '.join(PRECISIONS)}"
            )
        if self.quantization not in QUANTIZATION_MODES:
            raise UsageError(
                f"unknown CoreML quantization {self.quantization!r}; "
                f"choose one of {', '.join(QUANTIZATION_MODES)}"
            )

    def quantization_plan(self) -> QuantizationPlan:
        ios = int(self.deployment_target().value) + _IOS_OFFSET
        return QuantizationPlan.for_target(self.quantization, ios)

    def deployment_target(self) -> Any:
        ct = import_coremltools()
        target = getattr(ct.target, self.minimum_deployment_target, None)
        if target is None or target < ct.target.iOS15:
            raise UsageError(
                f"minimum deployment target {self.minimum_deployment_target!r} cannot hold an ML Program",
                hint="use iOS15 or later (iOS16, iOS17, iOS18), or the macOS equivalents",
            )
        return target


def import_coremltools() -> Any:
    try:
        with quiet_coremltools():
            import coremltools
    except ImportError as exc:
        raise CompileError(
            "CoreML targets need coremltools, which is not installed", hint=install_hint("coreml")
        ) from exc
    return coremltools


#: stderr lines coremltools writes that are no news to a farm user: progress bars of its passes,
#: and, off macOS, that it cannot load the CoreML framework (the farm never asks it to)
_NOISE = re.compile(
    r"Running MIL .* pipeline|Failed to load '?_ML|^\s*$"
    # torch newer than coremltools has tested: said at import, kept in coreml-torch compile reports
    r"|has not been tested with coremltools"
)


@contextlib.contextmanager
def quiet_coremltools() -> Iterator[None]:
    """Run coremltools with its progress bars and import warnings held back; other stderr passes on."""
    held = io.StringIO()
    try:
        with contextlib.redirect_stderr(held):
            yield
    finally:
        kept = [line for line in re.split(r"[\r\n]+", held.getvalue()) if not _NOISE.search(line)]
        if kept:
            sys.stderr.write("\n".join(kept) + "\n")


def prepare_graph(
    model_path: Path, input_shapes: dict[str, tuple[int, ...]] | None, options: CoreMLOptions | None = None
) -> tuple[onnx.ModelProto, FoldedGraph]:
    model = load_onnx(model_path)
    if input_shapes:
        model = with_input_shapes(model, input_shapes)
    if options is not None and options.fixed_inputs:
        model = with_fixed_inputs(model, dict(options.fixed_inputs))
    keep = options is not None and options.quantization_plan().weight_op is not None
    # QLinearConv/QLinearMatMul become the QDQ units they stand for, which the lowering takes
    return model, expand_qoperators(fold_constants(model, keep_dequantize=keep))


def lower_checked(graph: FoldedGraph, options: CoreMLOptions) -> LoweredProgram:
    """The lowered MIL program; a CompileError listing every node that cannot be lowered otherwise."""
    try:
        return lower_graph(graph, lowering_table(), options.deployment_target(), options.quantization_plan())
    except LoweringFailed as exc:
        raise CompileError(
            describe_unsupported(exc.failures),
            hint="`farm compile --report-only` lists them for every target",
        ) from exc
    except NotLowerable as exc:
        raise CompileError(f"cannot lower to CoreML: {exc}") from exc


def list_unsupported(graph: FoldedGraph, options: CoreMLOptions) -> list[Unlowered]:
    """Every node the lowering cannot take; the op-type check alone where coremltools is missing."""
    table = lowering_table()
    try:
        with quiet_coremltools():
            import coremltools  # noqa: F401
    except ImportError:
        return find_unsupported(graph, table)
    try:
        lower_graph(graph, table, options.deployment_target(), options.quantization_plan())
    except LoweringFailed as exc:
        return exc.failures
    except NotLowerable as exc:
        return [Unlowered("input", "graph input", str(exc))]
    return []


def convert_program(
    lowered: LoweredProgram, graph: FoldedGraph, options: CoreMLOptions, compute_units: str
) -> Any:
    """coremltools' passes and serializer over the lowered program (which they consume)."""
    ct = import_coremltools()
    inputs = []
    for info in graph.inputs:
        if not info.is_static:
            dims = [d if isinstance(d, int) else ct.RangeDim(1, options.max_flexible_dim) for d in info.shape]
            inputs.append(ct.TensorType(name=lowered.input_names[info.name], shape=ct.Shape(dims)))
    precision = ct.precision.FLOAT16 if options.precision == "fp16" else ct.precision.FLOAT32
    try:
        with quiet_coremltools():
            return ct.convert(
                lowered.program,
                convert_to="mlprogram",
                compute_precision=precision,
                minimum_deployment_target=options.deployment_target(),
                compute_units=ct.ComputeUnit[compute_units],
                inputs=inputs or None,
                skip_model_load=True,
            )
    except (ValueError, TypeError, RuntimeError, NotImplementedError) as exc:
        raise CompileError(f"coremltools rejected the lowered program: {exc}") from exc


def compile_coreml(
    model_path: Path,
    target: Target,
    out_dir: Path,
    *,
    precision: str = DEFAULT_PRECISION,
    minimum_deployment_target: str = DEFAULT_DEPLOYMENT_TARGET,
    input_shapes: dict[str, tuple[int, ...]] | None = None,
    quantization: str = DEFAULT_QUANTIZATION,
    fixed_inputs: dict[str, float] | None = None,
) -> CompiledArtifact:
    """Compile `model_path` for a `coreml/*` target into `<out_dir>/model.mlpackage`.

    `fixed_inputs` pins scalar inputs (`--fix sr=16000`): they become constants, so the `If`s
    and shapes that depend on them fold, and the program no longer takes them."""
    if target.runtime != "coreml":
        raise UsageError(f"{target.name} is not a CoreML target")
    options = CoreMLOptions(
        precision,
        minimum_deployment_target,
        quantization=quantization,
        fixed_inputs=tuple(sorted((fixed_inputs or {}).items())),
    )
    compute_units = target.backend_spec.native
    package = out_dir / PACKAGE_NAME
    if model_path.suffix == ".mlpackage":
        return _take_package(model_path, target, package, compute_units)
    started = time.perf_counter()
    model, graph = prepare_graph(model_path, input_shapes, options)
    lowered = lower_checked(graph, options)
    lowered_ops = mil_histogram(lowered.program)
    lowered_casts = lowered_ops.get("cast", 0)
    mlmodel = convert_program(lowered, graph, options, compute_units)
    out_dir.mkdir(parents=True, exist_ok=True)
    if package.exists():
        shutil.rmtree(package)
    mlmodel.save(str(package))
    conversion_s = time.perf_counter() - started

    after = mlmodel._mil_program
    after_ops = mil_histogram(after)
    op_precision = mil_op_precision(after)
    casts = mil_casts(after)
    opset = default_opset(model)
    notes = [PLACEMENT_NOTE] if sys.platform != "darwin" else []
    if options.precision == "fp16":
        notes.append(FP16_NOTE)
    quantized = bool({"QuantizeLinear", "DequantizeLinear"} & {node.op_type for node in model.graph.node})
    if any("int8" in counts for counts in op_precision.values()):
        notes.append(INT8_NOTE)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        notes.append(f"opset {opset} is outside the tested range {MIN_OPSET}-{MAX_OPSET}")
    io = spec_io(mlmodel.get_spec())
    notes.extend(retyped_inputs(graph, io))
    notes.extend(named_as_onnx(graph, io))
    notes.extend(scalar_notes(graph, io, lowered))
    notes.extend(
        f"input {name} pinned to {value:g} (--fix): a constant of the program, which takes no such input"
        for name, value in options.fixed_inputs
    )
    report = CompileReport(
        target=target.name,
        nodes_before=len(model.graph.node),
        nodes_after=sum(after_ops.values()),
        op_types_before=dict(Counter(node.op_type for node in model.graph.node)),
        op_types_after=dict(after_ops),
        # MIL before and after coremltools' passes: ONNX and MIL op names do not compare.
        fusions=[c for c in op_count_changes(lowered_ops, after_ops) if c.op_type != "cast"],
        precision=precision_of(op_precision, options.precision),
        op_precision=op_precision,
        source_op_precision=source_op_precision(model),
        notes=notes,
        extra={
            "onnx_opset": opset,
            "package_bytes": package_bytes(package),
            "weight_bytes": weight_bytes(after),
            **({"quantization": options.quantization_plan().describe()} if quantized else {}),
            "onnx_nodes_after_folding": len(graph.nodes),
            "folded": dict(graph.folded),
            "fixed_inputs": dict(options.fixed_inputs),
            "mil_ops_lowered": {"count": sum(lowered_ops.values()), "op_types": dict(lowered_ops)},
            "mil_ops_after_passes": {"count": sum(after_ops.values()), "op_types": dict(after_ops)},
            "casts_inserted": max(0, len(casts) - lowered_casts),
            "casts": casts,
            **io,
            "rank0": {"inputs": lowered.rank0_inputs, "outputs": lowered.rank0_outputs},
            "compute_units": compute_units,
            "minimum_deployment_target": options.minimum_deployment_target,
            "coremltools_version": import_coremltools().__version__,
            "conversion_s": round(conversion_s, 3),
        },
    )
    _add_placement(report, package, compute_units)
    io_names = io_name_map(io)
    save_io_names(io_names, package)
    return CompiledArtifact(
        target=target, path=package, sha256=tree_sha256(package), report=report, io_names=io_names
    )


def io_name_map(io: dict[str, list[dict[str, Any]]]) -> IoNameMap:
    """The artifact's I/O name map, from the spec's entries once `named_as_onnx` gave them ONNX names."""

    def features(entries: list[dict[str, Any]]) -> tuple[Feature, ...]:
        return tuple(
            Feature(
                onnx_name=str(e.get("onnx_name", e["name"])),
                feature_name=str(e["name"]),
                dtype=str(e["dtype"]),
                shape=tuple(int(d) for d in e["shape"]),
            )
            for e in entries
        )

    io_names = IoNameMap(inputs=features(io["inputs"]), outputs=features(io["outputs"]))
    io_names.check_unique()
    return io_names


def _take_package(source: Path, target: Target, package: Path, compute_units: str) -> CompiledArtifact:
    """A ready .mlpackage is the artifact as it is; its report comes from its spec."""
    ct = import_coremltools()
    try:
        mlmodel = ct.models.MLModel(str(source), skip_model_load=True)
        spec = mlmodel.get_spec()
    except Exception as exc:  # coremltools raises bare Exceptions for unreadable packages
        raise ModelError(f"{source} is not a readable .mlpackage: {exc}") from exc
    if not spec.HasField("mlProgram"):
        raise CompileError(f"{source} is not an ML Program (neural network models are not supported)")
    ops = spec_op_histogram(spec)
    if source.resolve() != package.resolve():
        package.parent.mkdir(parents=True, exist_ok=True)
        if package.exists():
            shutil.rmtree(package)
        shutil.copytree(source, package)
    precision = spec_precision(spec)
    notes = ["taken as it is: a .mlpackage input is not recompiled"]
    if sys.platform != "darwin":
        notes.insert(0, PLACEMENT_NOTE)
    if precision == "fp16":
        notes.append(FP16_NOTE)
    report = CompileReport(
        target=target.name,
        nodes_before=sum(ops.values()),
        nodes_after=sum(ops.values()),
        op_types_before=dict(ops),
        op_types_after=dict(ops),
        fusions=[],
        precision=precision,
        notes=notes,
        extra={
            "mil_ops_after_passes": {"count": sum(ops.values()), "op_types": dict(ops)},
            **spec_io(spec),
            "compute_units": compute_units,
            "package_bytes": package_bytes(package),
            "specification_version": int(spec.specificationVersion),
        },
    )
    _add_placement(report, package, compute_units)
    io_names = io_name_map(report.extra)  # a package taken as it is: its own names are the names
    save_io_names(io_names, package)
    return CompiledArtifact(
        target=target, path=package, sha256=tree_sha256(package), report=report, io_names=io_names
    )


def _add_placement(report: CompileReport, package: Path, compute_units: str) -> None:
    if sys.platform != "darwin":
        return
    from ondevice_farm.runtimes.coreml.compile.placement import compute_plan

    plan = compute_plan(package, compute_units)
    report.placement = plan.device_counts
    report.node_placement = plan.op_devices
    report.extra["estimated_cost"] = plan.op_costs
    report.fallback_ops = (
        [op for op, device in plan.op_devices.items() if device == "CPU"]
        if compute_units != "CPU_ONLY"
        else []
    )
    if plan.error:
        report.notes.append(f"MLComputePlan gave no placement: {plan.error}")
