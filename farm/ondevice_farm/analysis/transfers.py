"""Copies between the accelerator and the CPU, read from a profiled run: what each fallback costs.

When a provider (CUDA, DirectML, ...) lacks a kernel, ORT runs the node on the CPU and inserts
`MemcpyToHost` before it and `MemcpyFromHost` after it. The profile lists those copy nodes with
their own time (`args.provider` is the accelerator: the copy kernels belong to it), so the cost
of a fallback is the CPU node's time plus the copies around it.

"Around" is read from execution order: the copies that run right before a stretch of CPU nodes
and right after it. With parallel branches the executor may interleave nodes, so the pairing is
the nearest one in the sequential plan, which is the plan ORT runs by default; a node reached
through two copies in different stretches is charged to the nearer one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.compile.placement import Placement, cpu_providers
from ondevice_farm.measurement import OpTiming

COPY_OPS = frozenset({"MemcpyToHost", "MemcpyFromHost"})


@dataclass(frozen=True)
class Fallback:
    """A stretch of consecutive CPU nodes inside an accelerator run, with the copies around it."""

    nodes: tuple[OpTiming, ...]
    copies_in: tuple[OpTiming, ...]
    copies_out: tuple[OpTiming, ...]

    @property
    def node_us(self) -> float:
        return sum(n.time_us for n in self.nodes)

    @property
    def copy_us(self) -> float:
        return sum(c.time_us for c in self.copies_in + self.copies_out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [
                {"name": n.name, "op_type": n.op_type, "time_us": round(n.time_us, 3)} for n in self.nodes
            ],
            "node_us": round(self.node_us, 3),
            "copies": [
                {"name": c.name, "op_type": c.op_type, "time_us": round(c.time_us, 3)}
                for c in self.copies_in + self.copies_out
            ],
            "copy_us": round(self.copy_us, 3),
        }


@dataclass
class TransferReport:
    accelerator: str
    total_us: float
    copies: list[OpTiming] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    #: contiguous runs of one provider in execution order, copy nodes left out
    partitions: int = 0
    placement: dict[str, int] = field(default_factory=dict)

    @property
    def copy_us(self) -> float:
        return sum(c.time_us for c in self.copies)

    @property
    def copy_share(self) -> float:
        """Copy time over all node time of one run (0 when nothing was timed)."""
        return self.copy_us / self.total_us if self.total_us > 0 else 0.0

    @property
    def fallback_us(self) -> float:
        return sum(f.node_us for f in self.fallbacks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "accelerator": self.accelerator,
            "total_us": round(self.total_us, 3),
            "copy_count": len(self.copies),
            "copy_us": round(self.copy_us, 3),
            "copy_share": round(self.copy_share, 6),
            "fallback_us": round(self.fallback_us, 3),
            "fallback_nodes": sum(len(f.nodes) for f in self.fallbacks),
            "partitions": self.partitions,
            "placement": dict(self.placement),
            "fallbacks": [f.to_dict() for f in self.fallbacks],
        }

    def summary(self) -> str:
        """One line for the job notes."""
        pct = 100.0 * self.copy_share
        return (
            f"transfers: {len(self.copies)} copy node(s), {self.copy_us:.1f} us = {pct:.1f}% of node time; "
            f"{sum(len(f.nodes) for f in self.fallbacks)} CPU fallback node(s) in {len(self.fallbacks)} "
            f"stretch(es), {self.fallback_us:.1f} us; {self.partitions} partition(s)"
        )


def is_copy(op: OpTiming) -> bool:
    return op.op_type in COPY_OPS


def _cpu_stretches(ops: Sequence[OpTiming]) -> list[tuple[int, int]]:
    stretches: list[tuple[int, int]] = []
    cpu = cpu_providers()
    i = 0
    while i < len(ops):
        if ops[i].provider in cpu and not is_copy(ops[i]):
            start = i
            while i < len(ops) and ops[i].provider in cpu and not is_copy(ops[i]):
                i += 1
            stretches.append((start, i))
            continue
        i += 1
    return stretches


def transfer_report(ops: Sequence[OpTiming], accelerator: str) -> TransferReport:
    """`ops` in execution order (as `op_timings` returns them); `accelerator` the target's provider.

    Every `MemcpyToHost` feeds a CPU node, so it is charged to the next CPU stretch; every
    `MemcpyFromHost` carries a CPU result back, so it is charged to the stretch before it. A
    `MemcpyFromHost` with no CPU stretch before it copies a graph input and stays uncharged.
    """
    report = TransferReport(
        accelerator=accelerator,
        total_us=sum(op.time_us for op in ops),
        copies=[op for op in ops if is_copy(op)],
        partitions=Placement({op.name: op.provider for op in ops if not is_copy(op)}).partitions,
        placement=dict(Counter(op.provider for op in ops)),
    )
    if accelerator in cpu_providers():
        return report
    stretches = _cpu_stretches(ops)
    copies_in: list[list[OpTiming]] = [[] for _ in stretches]
    copies_out: list[list[OpTiming]] = [[] for _ in stretches]
    for j, op in enumerate(ops):
        if op.op_type == "MemcpyToHost":
            after = [k for k, (start, _) in enumerate(stretches) if start > j]
            if after:
                copies_in[after[0]].append(op)
        elif op.op_type == "MemcpyFromHost":
            before = [k for k, (_, end) in enumerate(stretches) if end <= j]
            if before:
                copies_out[before[-1]].append(op)
    report.fallbacks = [
        Fallback(tuple(ops[start:end]), tuple(copies_in[k]), tuple(copies_out[k]))
        for k, (start, end) in enumerate(stretches)
    ]
    return report


def ops_from_table(table: Iterable[Mapping[str, Any]]) -> list[OpTiming]:
    """The job document's `ops` rows back into `OpTiming`s, for stored jobs (rows stored before
    medians have a mean only)."""
    return [
        OpTiming(
            name=str(r["name"]),
            op_type=str(r["op_type"]),
            provider=str(r["provider"]),
            mean_us=float(r["mean_us"]),
            median_us=None if r.get("median_us") is None else float(r["median_us"]),
            runs=None if r.get("runs") is None else int(r["runs"]),
        )
        for r in table
    ]
