"""One report of a run (or two): the comparison, the findings, the op alignment and the
pre-flight prediction against what the devices did. The HTML and the JSON are views of this."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ondevice_farm.analysis.divergence import DivergenceCurve
from ondevice_farm.errors import FarmError
from ondevice_farm.reports.alignment import Alignment, SourceNode, align, source_nodes
from ondevice_farm.reports.compare import Column, Comparison, compare, fusion_differences
from ondevice_farm.reports.findings import Finding, find
from ondevice_farm.reports.findings.preflight import PreflightCheck, preflight_mismatch

REPORT_SCHEMA_VERSION = 1


@dataclass
class Report:
    comparison: Comparison
    findings: list[Finding]
    alignment: Alignment | None
    nodes: list[SourceNode]
    preflight: list[PreflightCheck] = field(default_factory=list)
    #: per-layer error curves, where asked for (`farm report --layers`, `farm diverge`); None otherwise
    layers: list[DivergenceCurve] | None = None
    #: column label -> why it has no per-layer curve
    layers_missing: dict[str, str] = field(default_factory=dict)

    @property
    def columns(self) -> list[Column]:
        return self.comparison.columns

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "run_id": self.comparison.run.get("run_id"),
            "against": None if self.comparison.against is None else self.comparison.against.get("run_id"),
            "model": self.comparison.model,
            "findings": [f.to_dict() for f in self.findings],
            "columns": [_column_dict(c) for c in self.columns],
            "predicted_snr_db": self.comparison.predicted_snr_db,
            "fusion_differences": [
                {"op_type": t, "fired": f, "not_fired": n} for t, f, n in fusion_differences(self.columns)
            ],
            "alignment": None if self.alignment is None else self.alignment.to_dict(),
            "preflight": [
                {
                    "column": p.label,
                    "predicted": p.predicted,
                    "observed": p.observed,
                    "confirmed": p.confirmed,
                    "unexpected": p.unexpected,
                    "avoided": p.avoided,
                    "reasons": p.reasons,
                    "conditions": p.conditions,
                }
                for p in self.preflight
            ],
            # the whole run where the columns are a window of it (run_reader.load_run)
            "jobs_total": self.comparison.run.get("jobs_total", len(self.comparison.run.get("jobs") or [])),
            "jobs_offset": self.comparison.run.get("jobs_offset", 0),
            "job_groups": self.comparison.run.get("job_groups"),
            "layers": None
            if self.layers is None
            else {
                "curves": [curve.to_dict() for curve in self.layers],
                "missing": dict(self.layers_missing),
            },
        }


def _column_dict(column: Column) -> dict[str, Any]:
    identity = {
        "label": column.label,
        "run_id": column.run_id,
        "device": column.device,
        "target": column.target,
        "status": column.status,
    }
    if not column.ok:
        return {**identity, "error": column.error}
    compile_ = column.compile
    latency = {k: v for k, v in column.latency.items() if k != "samples"}
    return {
        **identity,
        "runner": column.job.get("runner"),
        "latency_ms": latency,
        "samples_ms": column.samples_ms,
        "first_inference_ms": column.job.get("first_inference_ms"),
        "load_ms": column.job.get("load_ms"),
        "warm_load_ms": column.job.get("warm_load_ms"),
        "warm_load_method": column.job.get("warm_load_method"),
        "peak_memory_mb": column.job.get("peak_memory_mb"),
        "nodes_before": compile_.get("nodes_before"),
        "nodes_after": compile_.get("nodes_after"),
        "partitions": compile_.get("partitions"),
        "precision": column.precision,
        "placement": column.placement(),
        "time_by_backend_us": column.time_by_backend_us(),
        "fallbacks": [
            {
                "name": f.name,
                "op_type": f.op_type,
                "time_us": f.time_us,
                "share": f.share,
                "transfer_us": f.transfer_us,
                "transfer_ops": list(f.transfer_ops),
            }
            for f in column.fallbacks
        ],
        "fallback_share": column.fallback_share(),
        "reference": column.job.get("reference"),
    }


def onnx_refused(run: dict[str, Any]) -> bool:
    """Whether the run's PyTorch checkpoint has no ONNX export (torch.onnx.export refused it)."""
    source = (run.get("model") or {}).get("source") or {}
    return "refused" in (source.get("onnx_export") or {})


def locate_model(
    run: dict[str, Any], model_path: Path | None = None, artifacts_root: Path | None = None
) -> Path | None:
    """The source model of a run: the path given, else the one the run recorded if it still holds
    the same content, else a copy under its sha256 in the artifact store (the alignment needs the
    source graph)."""
    if model_path is not None and model_path.is_file():
        return model_path
    if onnx_refused(run):
        return None  # the run's model is the checkpoint itself: no ONNX graph to align
    model = run.get("model") or {}
    expected = str(model.get("sha256") or "")
    recorded = model.get("path")
    if recorded and expected and Path(recorded).is_file() and _holds(Path(recorded), expected):
        return Path(recorded)
    if artifacts_root is not None and expected:
        stored = sorted((artifacts_root / expected[:2] / expected).glob("*.onnx"))
        if stored:
            return stored[0]
    return None


def _observed_cpu_nodes(alignment: Alignment, column: Column) -> list[str]:
    nodes: list[str] = []
    for row in alignment.rows:
        cell = row.cells.get(column.label)
        if cell is not None and cell.backend == "CPU":
            nodes.extend(s.name for s in row.sources)
    return nodes


def _preflight(model: Path, alignment: Alignment, columns: list[Column]) -> list[PreflightCheck]:
    from ondevice_farm.preflight import predict

    checks = []
    accelerated = [c for c in columns if c.ok and not c.target.endswith("/cpu")]
    targets = sorted({c.target for c in accelerated})
    if not targets:
        return []
    predictions = {p.target: p for p in predict(model, targets)}
    for column in accelerated:
        prediction = predictions.get(column.target)
        if prediction is None or not prediction.known:
            continue
        checks.append(
            PreflightCheck(
                column.label,
                [u.node for u in prediction.unsupported],
                _observed_cpu_nodes(alignment, column),
                {u.node: u.reason for u in prediction.unsupported},
                {node: note for node, _, note in prediction.conditional},
            )
        )
    return checks


def build_report(
    run: dict[str, Any],
    against: dict[str, Any] | None = None,
    *,
    model_path: Path | None = None,
    artifacts_root: Path | None = None,
    predict_precision: bool = True,
    layers: LayerRequest | None = None,
) -> Report:
    """`predict_precision`: run the host fp16 prediction (a few seconds) where a job computes in fp16.
    `layers`: also compute each job's per-layer error curve (one host run per job and the reference)."""
    comparison = compare(run, against)
    model = locate_model(run, model_path, artifacts_root)
    if model is not None and predict_precision:
        from ondevice_farm.reports.prediction import PREDICTABLE, predicted_snr_db

        wanted = {c.precision for c in comparison.ok_columns if c.precision in PREDICTABLE}
        for precision in sorted(p for p in wanted if p is not None):
            comparison.predicted_snr_db[precision] = predicted_snr_db(model, run, precision)
    nodes: list[SourceNode] = source_nodes(model) if model is not None else []
    alignment = align(nodes, comparison.columns) if nodes else None
    preflight = _preflight(model, alignment, comparison.columns) if model and alignment else []
    findings = find(comparison) + preflight_mismatch(preflight)
    report = Report(comparison, [], alignment, nodes, preflight)
    if layers is not None:
        if model is None:
            report.layers = []
            report.layers_missing = {
                "run": "torch.onnx.export refused the checkpoint: no ONNX graph to cut into layers"
                if onnx_refused(run)
                else "the source model is not found: pass --model"
            }
        else:
            from ondevice_farm.reports.layers import layer_curves

            report.layers, report.layers_missing = layer_curves(
                run,
                comparison.ok_columns,
                model,
                host_devices=set(layers.host_devices),
                artifacts_root=artifacts_root,
                budget=layers.budget,
                predict=layers.predict,
            )
            findings += drift_start(report.layers)
    report.findings = sorted(findings, key=lambda f: -f.weight)
    return report


@dataclass(frozen=True)
class LayerRequest:
    """What `--layers` asks: which devices are this host (their jobs re-run here), and how many
    layers one run may capture before the search bisects."""

    host_devices: frozenset[str]
    budget: int
    #: targets without a job in the run to predict on the host beside the jobs (`coreml/ane`)
    predict: tuple[str, ...] = ()


def drift_start(curves: list[DivergenceCurve]) -> list[Finding]:
    """One finding per job whose values leave tolerance inside the network."""
    found = []
    for curve in curves:
        if curve.first is None:
            continue
        text = curve.finding() + (" (predicted on the host)" if curve.source == "predicted" else "")
        found.append(
            Finding("drift_start", 0.6, text, {"label": curve.label, **curve.to_dict()["first_divergent"]})
        )
    return found


def _holds(path: Path, sha256: str) -> bool:
    """Whether `path` is still the model hashed `sha256` (its external data files included)."""
    from ondevice_farm.artifacts import sha256_path

    try:
        return sha256_path(path) == sha256
    except FarmError:  # an external data file gone since: not the same model any more
        return False
