"""The side-by-side model of a report: one column per job (device and target), of one run or two.

Everything the HTML, JSON and findings show is computed here from stored job documents, so the
three agree. A value the job did not record is None, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.compile.placement import short_provider
from ondevice_farm.op_rows import op_time_us

#: how people write the backends whose provider names ONNX Runtime spells in CamelCase
BACKEND_NAMES = {"nnapi": "NNAPI", "xnnpack": "XNNPACK", "qnn": "QNN", "coreml": "CoreML", "cuda": "CUDA"}

#: op types that move tensors between a device's memory and the host's, in ORT's profile
TRANSFER_OP_TYPES = frozenset({"MemcpyToHost", "MemcpyFromHost", "Memcpy"})


@dataclass(frozen=True)
class Fallback:
    """One op the device ran on its CPU although the target asked for an accelerator."""

    name: str
    op_type: str
    #: its time per run by the statistic of the job's op table (the median where the profile
    #: recorded its runs, `op_time_us`); None where the device recorded the placement but no time
    time_us: float | None
    share: float | None
    #: time of the Memcpy ops next to it in execution order: what the hand-over cost
    transfer_us: float
    transfer_ops: tuple[str, ...]

    @property
    def cost_us(self) -> float | None:
        return None if self.time_us is None else self.time_us + self.transfer_us


@dataclass
class Column:
    """One job as the report shows it."""

    label: str
    run_id: str
    device: str
    target: str
    status: str
    job: dict[str, Any]
    error: str | None = None
    fallbacks: list[Fallback] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def latency(self) -> dict[str, Any]:
        return dict(self.job.get("latency_ms") or {})

    @property
    def samples_ms(self) -> list[float]:
        return [float(s) for s in self.latency.get("samples") or []]

    @property
    def ops(self) -> list[dict[str, Any]]:
        return list(self.job.get("ops") or [])

    @property
    def compile(self) -> dict[str, Any]:
        return dict(self.job.get("compile") or {})

    @property
    def precision(self) -> str | None:
        value = self.job.get("precision") or self.compile.get("precision")
        return str(value) if value else None

    @property
    def ops_total_us(self) -> float:
        return sum(op_time_us(op) or 0.0 for op in self.ops)

    def placement(self) -> dict[str, int]:
        """Backend -> kernels that ran there (the profile), else what the compiler placed."""
        placement = self.job.get("placement") or self.compile.get("placement") or {}
        return {backend_name(str(k)): int(v) for k, v in placement.items()}

    def delegation(self) -> tuple[int, int] | None:
        """(nodes the delegate took, nodes it left on fallback kernels) of a delegating runtime's
        compile (`compile.extra.delegation`); None for targets without a delegate or that record."""
        extra = self.compile.get("extra") or {}
        table: dict[str, dict[str, Any]] = extra.get("delegation") or {}
        if not table or not extra.get("delegate"):
            return None
        taken = sum(int(row.get("delegated", 0)) for row in table.values())
        return taken, sum(int(row.get("fallback", 0)) for row in table.values())

    @property
    def artifact_bytes(self) -> int | None:
        """Size of the compiled artifact, where the compile report recorded it."""
        extra = self.compile.get("extra") or {}
        size = extra.get("artifact_bytes", extra.get("package_bytes"))
        return None if size is None else int(size)

    def time_by_backend_us(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for op in self.ops:
            backend = backend_name(str(op.get("provider") or "?"))
            totals[backend] = totals.get(backend, 0.0) + (op_time_us(op) or 0.0)
        return totals

    def outputs(self) -> dict[str, dict[str, Any]]:
        reference = self.job.get("reference") or {}
        return dict(reference.get("outputs") or {})

    def fallback_share(self) -> float | None:
        """Share of the op time spent in fallbacks and their copies; None where not recorded."""
        total = self.ops_total_us
        costs = [f.cost_us for f in self.fallbacks]
        if not total or any(c is None for c in costs):
            return None
        return sum(c for c in costs if c is not None) / total


def backend_name(provider: str) -> str:
    """`NnapiExecutionProvider` -> `NNAPI`, `CPUExecutionProvider` -> `CPU`; Core ML's `ANE` as it is."""
    short = short_provider(provider)
    return BACKEND_NAMES.get(short.lower(), short)


def _is_transfer(op: dict[str, Any]) -> bool:
    return str(op.get("op_type", "")) in TRANSFER_OP_TYPES or str(op.get("name", "")).startswith("Memcpy")


def fallbacks_with_cost(job: dict[str, Any]) -> list[Fallback]:
    """The job's CPU fallbacks, each with the transfers that surround it in execution order.

    A Memcpy is charged to the fallback it borders; one between two fallbacks is charged once,
    to the first."""
    recorded = list(job.get("fallback_ops") or [])
    names = {str(op["name"]) for op in recorded}
    ops = list(job.get("ops") or [])
    # a placement-only recording lists its fallbacks without a per-op profile around them
    ops += [op for op in recorded if str(op["name"]) not in {str(o.get("name")) for o in ops}]
    charged: set[int] = set()
    result = []
    for index, op in enumerate(ops):
        if str(op.get("name")) not in names or _is_transfer(op):
            continue
        transfer: list[int] = []
        for neighbour in (index - 1, index + 1):
            if 0 <= neighbour < len(ops) and _is_transfer(ops[neighbour]) and neighbour not in charged:
                transfer.append(neighbour)
                charged.add(neighbour)
        share = op.get("share")
        result.append(
            Fallback(
                name=str(op["name"]),
                op_type=str(op.get("op_type", "")),
                time_us=op_time_us(op),
                share=None if share is None else float(share),
                transfer_us=sum(op_time_us(ops[i]) or 0.0 for i in transfer),
                transfer_ops=tuple(str(ops[i]["name"]) for i in transfer),
            )
        )
    return sorted(result, key=lambda f: -(f.cost_us or 0.0))


def columns_of(run: dict[str, Any], tag: str = "") -> list[Column]:
    columns = []
    for job in run.get("jobs") or []:
        label = f"{job['device']} {job['target']}" + (f" [{tag}]" if tag else "")
        columns.append(
            Column(
                label=label,
                run_id=str(job.get("run_id") or run.get("run_id")),
                device=str(job["device"]),
                target=str(job["target"]),
                status=str(job.get("status")),
                job=job,
                error=job.get("error"),
                fallbacks=fallbacks_with_cost(job) if job.get("status") == "ok" else [],
            )
        )
    return columns


@dataclass
class Comparison:
    run: dict[str, Any]
    against: dict[str, Any] | None
    columns: list[Column]
    #: precision -> output -> SNR (dB) the host predicts for that precision alone (see prediction.py)
    predicted_snr_db: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def ok_columns(self) -> list[Column]:
        return [c for c in self.columns if c.ok]

    @property
    def model(self) -> dict[str, Any]:
        return dict(self.run.get("model") or {})


def compare(run: dict[str, Any], against: dict[str, Any] | None = None) -> Comparison:
    """Columns of `run`, then of `against` (each tagged by its run id when there are two)."""
    if against is None:
        return Comparison(run, None, columns_of(run))
    tag_a, tag_b = str(run.get("run_id", "A"))[-6:], str(against.get("run_id", "B"))[-6:]
    if tag_a == tag_b:
        tag_a, tag_b = "A", "B"
    return Comparison(run, against, columns_of(run, tag_a) + columns_of(against, tag_b))


#: op types a compiler adds that move or re-lay data rather than fuse computation
NOT_FUSIONS = frozenset(
    {"ReorderInput", "ReorderOutput", "MemcpyToHost", "MemcpyFromHost", "Transpose", "Cast", "cast"}
)


def fusion_sets(column: Column) -> dict[str, int]:
    """Op types that compilation created (fused kernels): op type -> count after."""
    return {
        str(f["op_type"]): int(f["after"])
        for f in column.compile.get("fusions") or []
        if int(f.get("before", 0)) == 0 and int(f.get("after", 0)) > 0 and f["op_type"] not in NOT_FUSIONS
    }


def fusion_differences(columns: list[Column]) -> list[tuple[str, list[str], list[str]]]:
    """(fused op type, columns where it appeared, columns where it did not) for op types that
    appeared in some but not all compiled columns."""
    compiled = [c for c in columns if c.ok and c.compile]
    by_type: dict[str, list[str]] = {}
    for column in compiled:
        for op_type in fusion_sets(column):
            by_type.setdefault(op_type, []).append(column.label)
    return [
        (op_type, fired, [c.label for c in compiled if c.label not in fired])
        for op_type, fired in sorted(by_type.items())
        if len(fired) < len(compiled)
    ]
