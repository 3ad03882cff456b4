"""Compile for ONNX Runtime targets: the artifact to ship and the report of what ORT did.

What ships: for the CPU and CUDA providers, the model optimised at ORT_ENABLE_EXTENDED
(fusions that belong to those providers, no machine-specific layout); for the other
providers (NNAPI, XNNPACK, QNN), the ORT_ENABLE_BASIC model, since extended fusions emit
contrib ops those providers cannot take and the device's runtime makes its own choices.

What the report says: op types before and after ORT_ENABLE_ALL on this host with the
target's providers (where they are installed here), node -> provider placement from
ONNX Runtime's graph-assignment info, CPU fallbacks and partitions.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import onnx

from ondevice_farm.artifacts import ArtifactStore, tree_size_bytes
from ondevice_farm.compile.placement import Placement, placement_from_assignment
from ondevice_farm.compile.precision import ort_op_precision, source_op_precision
from ondevice_farm.compile.report import CompiledArtifact, CompileReport, op_count_changes
from ondevice_farm.errors import CompileError
from ondevice_farm.onnx_external import external_files
from ondevice_farm.targets import Target

SHIPPED_LEVEL = {"cpu": "extended", "cuda": "extended"}
QUIET_LOG_SEVERITY = 3


#: beside a shipped model whose source kept its weights in external data files
SHIPPED_EXTERNAL_DATA = "model.onnx.data"


def _session_options(
    level: str, optimized_path: Path | None, record_assignment: bool, external_data: bool = False
) -> object:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = {
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[level]
    options.log_severity_level = QUIET_LOG_SEVERITY
    if optimized_path is not None:
        options.optimized_model_filepath = str(optimized_path)
        if external_data:
            # Left to itself ORT points the optimised model at the source's data files, which do
            # not travel with it: its weights go to one file of its own beside it instead.
            options.add_session_config_entry(
                "session.optimized_model_external_initializers_file_name", SHIPPED_EXTERNAL_DATA
            )
    if record_assignment:
        options.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    return options


def available_providers() -> list[str]:
    import onnxruntime as ort

    return list(ort.get_available_providers())


def _optimise(
    model_path: Path, level: str, providers: list[str], out: Path, record_assignment: bool = False
) -> tuple[Placement | None, str]:
    import onnxruntime as ort

    options = _session_options(level, out, record_assignment, external_data=bool(external_files(model_path)))
    try:
        session = ort.InferenceSession(str(model_path), options, providers=providers)
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
        raise CompileError(f"ONNX Runtime cannot load the model: {str(exc).splitlines()[0]}") from None
    if not record_assignment:
        return None, ""
    try:
        info = session.get_provider_graph_assignment_info()
    except Exception:  # older onnxruntime: placement comes from the device's profile instead
        return None, "node placement: this onnxruntime has no graph-assignment info; taken from the profile"
    return placement_from_assignment(info), ""


def _op_types(model: onnx.ModelProto) -> Counter[str]:
    return Counter(node.op_type for node in model.graph.node)


def _load(path: Path) -> onnx.ModelProto:
    return onnx.load(str(path), load_external_data=False)


def compile_ort(model_path: Path, target: Target, store: ArtifactStore) -> CompiledArtifact:
    providers = target.ort_providers()
    here = set(available_providers())
    notes: list[str] = []
    source = _load(model_path)
    before = _op_types(source)
    with tempfile.TemporaryDirectory(prefix="farm-compile-") as tmp:
        shipped = Path(tmp) / "model.onnx"
        level = SHIPPED_LEVEL.get(target.backend, "basic")
        # only CUDA's shipped graph holds provider-specific kernels; the others ship provider-neutral
        shipping_providers = [p for p in providers if p in here] if target.backend == "cuda" else []
        _optimise(model_path, level, shipping_providers or ["CPUExecutionProvider"], shipped)
        if providers[0] in here:
            reported = Path(tmp) / "report.onnx"
            placement, note = _optimise(model_path, "all", providers, reported, record_assignment=True)
            compiled_graph = _load(reported)
            # the graph ORT runs here: a QDQ unit it left unfused runs in float between conversions
            op_precision = ort_op_precision(compiled_graph, qdq_units_quantized=False)
        else:
            placement, note = None, ""
            compiled_graph = _load(shipped)
            # the provider on the device takes QDQ units as its quantized kernels
            op_precision = ort_op_precision(compiled_graph, qdq_units_quantized=True)
            notes.append(
                f"{providers[0]} is not installed on this host: the op counts after are ORT's "
                f"{level}-level graph; {target.backend}-specific fusions and placement are "
                "decided on the device and come from its profile"
            )
        after = _op_types(compiled_graph)
        if note:
            notes.append(note)
        if level != "extended" and providers[0] in here:
            notes.append(
                f"shipped at ORT_ENABLE_{level.upper()}: the device's runtime fuses for its provider"
            )
        sha, path = store.put(shipped, "model.onnx")
    report = CompileReport(
        target=target.name,
        nodes_before=sum(before.values()),
        nodes_after=sum(after.values()),
        op_types_before=dict(sorted(before.items())),
        op_types_after=dict(sorted(after.items())),
        fusions=op_count_changes(before, after),
        precision=_precision(source),
        op_precision=op_precision,
        source_op_precision=source_op_precision(source),
        notes=notes,
        extra={"artifact_bytes": tree_size_bytes(path)},
    )
    if placement is not None:
        report.placement = placement.counts()
        report.node_placement = dict(placement.nodes)
        report.partitions = placement.partitions
        report.fallback_ops = placement.fallbacks(target)
    return CompiledArtifact(target=target, path=path, sha256=sha, report=report)


def _precision(model: onnx.ModelProto) -> str:
    """fp32 unless the model's float initializers are fp16, or it carries quantize ops."""
    ops = {node.op_type for node in model.graph.node}
    if ops & {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "MatMulInteger"}:
        return "int8"
    kinds = {init.data_type for init in model.graph.initializer}
    if onnx.TensorProto.FLOAT16 in kinds and onnx.TensorProto.FLOAT not in kinds:
        return "fp16"
    return "fp32"
