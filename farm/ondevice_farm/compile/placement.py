"""Which provider runs which node, and what that means: partitions and CPU fallbacks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.runtimes.registry import fallback_kernels
from ondevice_farm.targets import Target


def cpu_providers() -> frozenset[str]:
    """Where an op lands when the accelerator (or delegate) did not take it: every registered
    runtime's CPU kernels, as its spec names them (RuntimeSpec.fallback_kernels)."""
    return fallback_kernels()


def short_provider(provider: str) -> str:
    """`CUDAExecutionProvider` -> `CUDA`: the name people use in tables."""
    return provider.removesuffix("ExecutionProvider") or provider


@dataclass
class Placement:
    #: node name -> provider, in execution order
    nodes: dict[str, str] = field(default_factory=dict)
    #: node name -> op type
    op_types: dict[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return dict(Counter(self.nodes.values()))

    @property
    def partitions(self) -> int:
        """Contiguous runs of one provider in execution order: each border is a hand-over."""
        runs = 0
        previous = None
        for provider in self.nodes.values():
            if provider != previous:
                runs += 1
                previous = provider
        return runs

    def fallbacks(self, target: Target) -> list[str]:
        """Nodes on the CPU although the target asked for an accelerator."""
        if not target.is_accelerator:
            return []
        cpu = cpu_providers()
        return [name for name, provider in self.nodes.items() if provider in cpu]


def placement_from_assignment(subgraphs: Iterable[Any]) -> Placement:
    """From `InferenceSession.get_provider_graph_assignment_info()` (onnxruntime >= 1.32)."""
    placement = Placement()
    for subgraph in subgraphs:
        for node in subgraph.get_nodes():
            placement.nodes[str(node.name)] = str(subgraph.ep_name)
            placement.op_types[str(node.name)] = str(node.op_type)
    return placement
