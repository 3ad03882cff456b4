"""The compile report of an IREE module, in the farm's shape (compile/report.py).

Before: the ONNX model's ops. After: the dispatches the module issues per call (the scheduler's
count), typed by IREE's name for each dispatch's root op (`conv`, `matmul`, `reduction`,
`slow_memcpy`). IREE's dispatches and ONNX ops do not compare by name, so `fusions` is empty as in
the delegate runtimes' reports; `extra.dispatches` says per dispatch which ONNX nodes it computes,
`extra.fused` counts them by what they compute (`Conv+Relu`), and the note says it in a line.
Every dispatch runs on the one device the module was built for: the placement is that device.
Precision per op group comes from the element types each dispatch's name ends with.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from ondevice_farm.compile.precision import dominant, precision_of, source_op_precision, summarise
from ondevice_farm.compile.report import CompileReport
from ondevice_farm.runtimes.iree import SPEC
from ondevice_farm.runtimes.iree.dispatches import Dispatch, fusion_summary
from ondevice_farm.targets import Target

#: the nodes no executable names, listed in the note (all of them in `extra.folded_nodes`)
FOLDED_SHOWN = 8


def fused_note(nodes: int, count: int, dispatches: list[Dispatch], folded: list[str]) -> str:
    """`IREE made 7 ONNX nodes 5 dispatches: Conv+Relu x2, Gemm x1, ...; named by no executable: flat`.

    A node no executable names was folded (a view, a reshape IREE makes a relabelling of the
    buffer), or computed by a region that reuses an identical region's executable, whose
    locations are the first region's."""
    summary = ", ".join(f"{label} x{n}" for label, n in fusion_summary(dispatches).items())
    note = f"IREE made {nodes} ONNX nodes {count} dispatches: {summary or 'none'}"
    if len(dispatches) != count:
        note += f" ({len(dispatches)} executables: IREE reuses one for identical regions)"
    if folded:
        shown = ", ".join(folded[:FOLDED_SHOWN]) + (
            f" and {len(folded) - FOLDED_SHOWN} more" if len(folded) > FOLDED_SHOWN else ""
        )
        note += f"; named by no executable: {shown}"
    return note


def op_precision(dispatches: list[Dispatch], fallback: str) -> dict[str, dict[str, int]]:
    """Op group -> {precision: ONNX nodes}, each node once, at the precision of the first dispatch
    that computes it (a conv's bias and activation may land in the next dispatch)."""
    precision: dict[str, tuple[str, str]] = {}
    for dispatch in dispatches:
        for node, op in zip(dispatch.nodes, dispatch.op_types, strict=True):
            precision.setdefault(node, (op, dispatch.precision or fallback))
    return summarise(list(precision.values()))


def report(
    target: Target,
    source: Any,
    types: dict[str, str],
    dispatches: list[Dispatch],
    count: int,
    artifact: Path,
    extra: dict[str, Any],
) -> CompileReport:
    """`source`: the ONNX model as given; `types`: the imported model's node name -> op type;
    `count`: the dispatches the scheduler issues per call."""
    before: Counter[str] = Counter(node.op_type for node in source.graph.node)
    after: Counter[str] = Counter(d.kind for d in dispatches)
    asked = source_op_precision(source)
    asked_total: Counter[str] = Counter()
    for counts in asked.values():
        asked_total.update(counts)
    # a dispatch whose name gives no element type computes in what the model asks for
    fallback = dominant(dict(asked_total))
    computed = op_precision(dispatches, fallback)
    device = SPEC.backend(target.backend).native
    placed = {node for d in dispatches for node in (*d.nodes, *d.moves_for)}
    folded = [name for name in types if name not in placed]
    return CompileReport(
        target=target.name,
        nodes_before=sum(before.values()),
        nodes_after=count,
        op_types_before=dict(sorted(before.items())),
        op_types_after=dict(sorted(after.items())),
        # dispatches and ONNX ops do not compare by name: `extra.dispatches` says what each fused
        fusions=[],
        placement={device: count},
        node_placement={d.name: device for d in dispatches},
        partitions=1,
        precision=precision_of(
            computed, dominant(dict(Counter(d.precision or fallback for d in dispatches)))
        ),
        op_precision=computed,
        source_op_precision=asked,
        notes=[fused_note(sum(before.values()), count, dispatches, folded)],
        extra={
            "dispatch_count": count,
            "executables": len(dispatches),
            "fused": fusion_summary(dispatches),
            "dispatches": [d.as_json() for d in dispatches],
            "folded_nodes": folded,
            "artifact_bytes": artifact.stat().st_size,
            **extra,
        },
    )
