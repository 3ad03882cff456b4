"""What compiling for one target produced: the artifact and the report of what changed."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ondevice_farm.compile.io_names import IoNameMap
from ondevice_farm.targets import Target


@dataclass(frozen=True)
class OpCountChange:
    """An op type whose count changed in compilation: a fusion fired, or ops were folded away."""

    op_type: str
    before: int
    after: int

    @property
    def appeared(self) -> bool:
        return self.before == 0 and self.after > 0


@dataclass
class CompileReport:
    target: str
    nodes_before: int
    nodes_after: int
    op_types_before: dict[str, int]
    op_types_after: dict[str, int]
    fusions: list[OpCountChange]
    #: provider (or compute device) -> node count; empty where only the device can tell
    placement: dict[str, int] = field(default_factory=dict)
    #: node name -> provider, where known at compile time
    node_placement: dict[str, str] = field(default_factory=dict)
    partitions: int = 0
    #: nodes on the CPU while the target is an accelerator
    fallback_ops: list[str] = field(default_factory=list)
    #: fp32, fp16, int8 or mixed: what the artifact computes in
    precision: str = "fp32"
    #: op group (conv, matmul, add, ...) -> {precision: op count}, from the compiled graph
    op_precision: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the same for the source model as given (a QDQ unit counts as int8): what it asks for
    source_op_precision: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: target-specific detail (e.g. MIL ops per stage, inserted casts)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["fusions"] = [asdict(f) for f in self.fusions]
        return data


@dataclass(frozen=True)
class CompiledArtifact:
    target: Target
    path: Path
    sha256: str
    report: CompileReport
    #: ONNX name <-> the compiled model's feature name, where the compile renames (CoreML)
    io_names: IoNameMap | None = None


def op_count_changes(before: Counter[str], after: Counter[str]) -> list[OpCountChange]:
    """Op types whose count changed, new ones (fused kernels) first."""
    changes = [
        OpCountChange(op, before.get(op, 0), after.get(op, 0))
        for op in sorted(set(before) | set(after))
        if before.get(op, 0) != after.get(op, 0)
    ]
    return sorted(changes, key=lambda c: (not c.appeared, c.op_type))
