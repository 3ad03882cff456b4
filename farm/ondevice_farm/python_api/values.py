"""A run and its jobs as frozen typed values, built from the run document the CLI's `--json`
prints (docs/results.md): the same fields under the same names, units in the names.

The whole document stays reachable (`Run.document`, `Job.document`) for what has no field here."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ondevice_farm.python_api.frames import JOB_COLUMNS, OP_COLUMNS, SAMPLE_COLUMNS, data_frame
from ondevice_farm.python_api.notebook import figure, html_table


@dataclass(frozen=True)
class Latency:
    """A job's timed runs in milliseconds (`latency_ms` of the job document)."""

    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    samples_ms: tuple[float, ...]

    @classmethod
    def of(cls, latency: dict[str, Any]) -> Latency:
        return cls(
            p50_ms=float(latency["p50"]),
            p90_ms=float(latency["p90"]),
            p99_ms=float(latency["p99"]),
            mean_ms=float(latency["mean"]),
            min_ms=float(latency["min"]),
            max_ms=float(latency["max"]),
            samples_ms=tuple(float(s) for s in latency.get("samples") or ()),
        )


@dataclass(frozen=True)
class Op:
    """One row of a job's per-op profile: the op, the backend that ran it, its mean time."""

    name: str
    op_type: str
    backend: str
    mean_us: float
    share: float

    @classmethod
    def of(cls, row: dict[str, Any]) -> Op:
        return cls(
            name=str(row.get("name", "")),
            op_type=str(row.get("op_type", "")),
            backend=str(row.get("provider") or row.get("backend") or ""),
            mean_us=float(row.get("mean_us") or 0.0),
            share=float(row.get("share") or 0.0),
        )


@dataclass(frozen=True)
class Job:
    """One (device, target) of a run."""

    job_id: str
    device: str
    unit: str | None
    target: str
    status: str
    error: str | None
    latency: Latency | None
    load_ms: float | None
    first_inference_ms: float | None
    peak_memory_mb: float | None
    precision: str | None
    fallback_ops: tuple[str, ...]
    ops: tuple[Op, ...]
    #: the outputs checked against the host reference: None where not compared
    reference_passed: bool | None
    document: MappingProxyType[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, job: dict[str, Any]) -> Job:
        latency = job.get("latency_ms")
        reference = job.get("reference") or {}
        return cls(
            job_id=str(job["job_id"]),
            device=str(job.get("device", "")),
            unit=job.get("unit"),
            target=str(job.get("target", "")),
            status=str(job.get("status", "")),
            error=job.get("error"),
            latency=Latency.of(latency) if isinstance(latency, dict) and "p50" in latency else None,
            load_ms=_number(job.get("load_ms")),
            first_inference_ms=_number(job.get("first_inference_ms")),
            peak_memory_mb=_number(job.get("peak_memory_mb")),
            precision=job.get("precision"),
            fallback_ops=tuple(str(o) for o in job.get("fallback_ops") or ()),
            ops=tuple(Op.of(row) for row in job.get("ops") or ()),
            reference_passed=reference.get("passed") if isinstance(reference.get("passed"), bool) else None,
            document=frozen(job),
        )

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class Run:
    """A stored run: a submission (`kind` "submit") or a suite's night ("nightly")."""

    run_id: str
    kind: str
    status: str
    model: str | None
    jobs: tuple[Job, ...]
    document: MappingProxyType[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, document: dict[str, Any]) -> Run:
        model = document.get("model")
        return cls(
            run_id=str(document["run_id"]),
            kind=str(document.get("kind", "")),
            status=str(document.get("status", "")),
            model=model.get("name") if isinstance(model, dict) else None,
            jobs=tuple(Job.of(j) for j in document.get("jobs") or ()),
            document=frozen(document),
        )

    def job(self, device: str, target: str) -> Job:
        """The job of `device` (a profile or a unit) and `target`."""
        for job in self.jobs:
            if target == job.target and device in (job.device, job.unit, job.document.get("requested")):
                return job
        have = ", ".join(f"{j.device} {j.target}" for j in self.jobs) or "none"
        raise KeyError(f"run {self.run_id} has no job of {device} {target} (it has: {have})")

    def jobs_frame(self) -> Any:
        """A pandas DataFrame, one row per job (columns: `frames.JOB_COLUMNS`, docs/python.md)."""
        rows = []
        for job in self.jobs:
            latency = job.latency
            figures = (
                (latency.p50_ms, latency.p90_ms, latency.p99_ms, latency.mean_ms) if latency else (None,) * 4
            )
            rows.append(
                (
                    *(job.job_id, job.device, job.unit, job.target, job.status, *figures, job.load_ms),
                    *(job.first_inference_ms, job.peak_memory_mb, job.precision, len(job.fallback_ops)),
                    *(job.reference_passed, job.error),
                )
            )
        return data_frame(rows, JOB_COLUMNS)

    def ops_frame(self) -> Any:
        """A pandas DataFrame, one row per op of each job's per-op profile (`frames.OP_COLUMNS`)."""
        rows = (
            (job.job_id, job.device, job.target, op.name, op.op_type, op.backend, op.mean_us, op.share)
            for job in self.jobs
            for op in job.ops
        )
        return data_frame(rows, OP_COLUMNS)

    def samples_frame(self) -> Any:
        """A pandas DataFrame, one row per timed run of each job (`frames.SAMPLE_COLUMNS`)."""
        rows = (
            (job.job_id, job.device, job.target, index, sample)
            for job in self.jobs
            if job.latency is not None
            for index, sample in enumerate(job.latency.samples_ms)
        )
        return data_frame(rows, SAMPLE_COLUMNS)

    def to_html(self) -> str:
        """The run's HTML report, as `farm report RUN --html` writes it."""
        from ondevice_farm.reports.html import render_html

        return render_html(thawed(self.document), predict_precision=False)

    def _repr_html_(self) -> str:
        """The run's summary table, as a notebook shows it."""
        rows = [
            [
                job.device if job.unit is None else f"{job.device}:{job.unit}",
                job.target,
                job.status,
                figure(job.latency.p50_ms if job.latency else None, 3),
                figure(job.latency.p90_ms if job.latency else None, 3),
                figure(job.load_ms, 1),
                figure(job.peak_memory_mb, 1),
                ", ".join(job.fallback_ops) or "none",
                {True: "passed", False: "FAILED", None: "-"}[job.reference_passed],
            ]
            for job in self.jobs
        ]
        head = [
            "device",
            "target",
            "status",
            "p50 ms",
            "p90 ms",
            "load ms",
            "peak MiB",
            "CPU fallbacks",
            "reference",
        ]
        title = f"run {self.run_id} ({self.kind}, {self.status})" + (f": {self.model}" if self.model else "")
        return html_table(title, head, rows)


def frozen(value: Any) -> Any:
    """A JSON document that cannot be changed in place: read-only mappings, tuples for lists."""
    if isinstance(value, dict):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    return value


def thawed(value: Any) -> Any:
    """A frozen document as the plain dicts and lists the reports take."""
    if isinstance(value, MappingProxyType):
        return {k: thawed(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thawed(v) for v in value]
    return value


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
