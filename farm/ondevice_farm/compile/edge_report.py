"""The compile report of a runtime with a delegate, in the shape of ONNX Runtime's.

Such a runtime splits one graph between a delegate (e.g. XNNPACK) and the kernels it falls back
to (its spec's `fallback_kernels`). `DelegatedGraph` holds that split in
execution order, one partition per delegate call or per run of fallback kernels; the report
turns it into what every compile report says: placement (backend -> nodes), node placement,
partitions, fallbacks, and per op how many nodes the delegate took and how many it left
(`extra.delegation`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ondevice_farm.compile.report import CompileReport
from ondevice_farm.targets import Target

#: an op's base name (ATen without `aten.` and overload, TFLite lowercased) -> the op group every
#: compile report uses (farm/ondevice_farm/compile/precision.py), so runtimes compare group by group
EDGE_OP_GROUPS: dict[str, str] = {
    **dict.fromkeys(["convolution", "conv_2d", "depthwise_conv_2d", "transpose_conv"], "conv"),
    **dict.fromkeys(["addmm", "mm", "bmm", "linear", "matmul", "fully_connected", "batch_matmul"], "matmul"),
    **dict.fromkeys(["add", "sub"], "add"),
    **dict.fromkeys(["mul", "div"], "mul"),
    **dict.fromkeys(
        ["max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "max_pool_2d", "average_pool_2d"], "pool"
    ),
    **dict.fromkeys(["mean", "sum", "amax", "reduce_max", "sum_dim_intlist"], "reduce"),
    **dict.fromkeys(
        ["relu", "gelu", "sigmoid", "tanh", "hardtanh", "logistic", "hardswish", "erf", "silu"],
        "activation",
    ),
    **dict.fromkeys(["_softmax", "softmax"], "softmax"),
    **dict.fromkeys(
        ["native_layer_norm", "_native_batch_norm_legit_no_training", "layer_norm", "batch_norm"], "norm"
    ),
    **dict.fromkeys(["cat", "concatenation"], "concat"),
}


def op_group(op: str) -> str | None:
    """`aten.convolution.default` -> `conv`, `CONV_2D` -> `conv`; None for data movement."""
    parts = op.split(".")
    base = parts[1] if parts[0] == "aten" and len(parts) > 1 else parts[0]
    return EDGE_OP_GROUPS.get(base.lower())


@dataclass
class DelegatedGraph:
    """The kernels of a compiled graph in execution order, in partitions: (backend, [(node, op)]).
    `fallback` names the kernels a delegate leaves ops to (`portable`, `builtin`)."""

    fallback: str
    partitions: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)

    def add_partition(self, backend: str, nodes: list[tuple[str, str]]) -> None:
        """A delegate call is a partition of its own; consecutive fallback kernels share one."""
        if backend == self.fallback and self.partitions and self.partitions[-1][0] == backend:
            self.partitions[-1][1].extend(nodes)
            return
        self.partitions.append((backend, list(nodes)))

    def nodes(self) -> list[tuple[str, str, str]]:
        """(node, op, backend) in execution order."""
        return [(name, op, backend) for backend, nodes in self.partitions for name, op in nodes]

    def fallback_nodes(self) -> list[tuple[str, str]]:
        return [(name, op) for name, op, backend in self.nodes() if backend == self.fallback]

    def delegate_calls(self) -> int:
        return sum(1 for backend, _ in self.partitions if backend != self.fallback)

    def placement(self) -> dict[str, int]:
        return dict(Counter(backend for _, _, backend in self.nodes()))

    def delegation(self) -> dict[str, dict[str, int]]:
        """op -> {"delegated": n, "fallback": m}: what the delegate took of each op and what it left."""
        table: dict[str, dict[str, int]] = {}
        for _, op, backend in self.nodes():
            row = table.setdefault(op, {"delegated": 0, "fallback": 0})
            row["fallback" if backend == self.fallback else "delegated"] += 1
        return dict(sorted(table.items()))


def describe_delegation(delegation: dict[str, dict[str, int]], delegate: str, fallback: str) -> str:
    """One line: `XNNPACK took 9 of 10 nodes; left on portable kernels: aten.mean.dim 1`."""
    taken = sum(row["delegated"] for row in delegation.values())
    total = taken + sum(row["fallback"] for row in delegation.values())
    left = ", ".join(f"{op} {row['fallback']}" for op, row in delegation.items() if row["fallback"])
    if not delegate:
        return f"no delegate: all {total} nodes on {fallback} kernels"
    return f"{delegate} took {taken} of {total} nodes" + (
        f"; left on {fallback} kernels: {left}" if left else "; none left on fallback kernels"
    )


def edge_report(
    target: Target,
    *,
    before: Counter[str],
    after: Counter[str],
    graph: DelegatedGraph,
    delegate: str,
    artifact: Path,
    precision: str = "fp32",
    op_precision: dict[str, dict[str, int]] | None = None,
    notes: list[str] | None = None,
    extra: dict[str, Any] | None = None,
) -> CompileReport:
    """`delegate`: the delegate's name ("" where the target asks for none)."""
    delegation = graph.delegation()
    fallbacks = [name for name, _ in graph.fallback_nodes()] if delegate else []
    groups: dict[str, dict[str, int]] = {}
    for op, rows in delegation.items():
        group = op_group(op)
        if group is not None:
            counts = groups.setdefault(group, {})
            counts[precision] = counts.get(precision, 0) + rows["delegated"] + rows["fallback"]
    return CompileReport(
        target=target.name,
        nodes_before=sum(before.values()),
        nodes_after=sum(after.values()),
        op_types_before=dict(sorted(before.items())),
        op_types_after=dict(sorted(after.items())),
        # ATen ops and the runtime's kernels do not compare by name: `extra.delegation` says per op
        # what the delegate took and what it left
        fusions=[],
        placement=graph.placement(),
        node_placement={name: backend for name, _, backend in graph.nodes()},
        partitions=len(graph.partitions),
        fallback_ops=fallbacks,
        precision=precision,
        op_precision=op_precision if op_precision is not None else groups,
        notes=[describe_delegation(delegation, delegate, graph.fallback), *(notes or [])],
        extra={
            "delegate": delegate or None,
            "fallback_kernels": graph.fallback,
            "delegation": delegation,
            "artifact_bytes": artifact.stat().st_size,
            **(extra or {}),
        },
    )
