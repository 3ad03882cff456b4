"""Read ONNX Runtime's own session log: where nodes were placed, which copies were added, and why.

ORT writes these lines while it creates a session (severity INFO or VERBOSE):

- `VerifyEachNodeIsAssignedToAnEp`: "Node placements", then per provider
  ` Node(s) placed on [<EP>]. Number of nodes: N` followed by `  <OpType> (<node name>)` lines,
  or ` All nodes placed on [<EP>]. Number of nodes: N` when there is one provider;
- `TransformerMemcpyImpl::AddCopyNode`: `Add MemcpyFromHost after <tensor> for <EP>` and
  `Add MemcpyToHost before <tensor> for <EP>`, one per tensor that crosses a device border;
- `GetCapability` of the CUDA provider: `CUDA kernel not found in registries for Op type: <op>
  node name: <name>`: the reason a node cannot run on the GPU;
- `GetCpuPreferredNodes`: `Force fallback to CPU execution for node: <name>`: a node ORT keeps on
  the CPU by choice (shape arithmetic), though the provider has a kernel for it.

And with `session.disable_cpu_ep_fallback` = 1 session creation fails with a fixed sentence that
names no node; the nodes come from the log lines above (see
`agents/ondevice_farm_agents/host/fallback_probe.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: the refusal ORT raises when a node lands on the CPU while fallback is disabled (inference_session.cc)
FALLBACK_REFUSAL = "fallback to CPU EP has been explicitly disabled"
#: raised instead when the CPU provider was listed explicitly next to the disable flag
FALLBACK_CONFLICT = "Conflicting session configuration"

_LINE = re.compile(
    r"\[(?P<sev>[VIWEF]):onnxruntime:[^,\]]*,\s*(?P<src>\S+)\s+(?P<func>[^\]]+)\]\s?(?P<msg>.*)$"
)
_PLACED = re.compile(
    r"^\s*(?P<all>All nodes|Node\(s\)) placed on \[(?P<ep>[^\]]+)\]\. Number of nodes: (?P<n>\d+)"
)
_NODE = re.compile(r"^\s{2,}(?P<op>\S+) \((?P<name>.*)\)\s*$")
_COPY = re.compile(
    r"Add (?P<kind>MemcpyFromHost|MemcpyToHost) (?:after|before) (?P<tensor>.+) for (?P<ep>\S+)\s*$"
)
_NO_KERNEL = re.compile(
    r"(?P<ep>\w+) kernel not found in registries for Op type: (?P<op>\S+) node name: (?P<name>.*)$"
)
_CPU_PREFERRED = re.compile(r"Force fallback to CPU execution for node: (?P<name>.+?)(?: because .*)?$")
_COPY_COUNT = re.compile(r"(?P<n>\d+) Memcpy nodes are added to the graph (?P<graph>\S+) for (?P<ep>\S+)\.")


@dataclass(frozen=True)
class CopyInsertion:
    """A copy node ORT added: `MemcpyToHost` before a CPU consumer, `MemcpyFromHost` after a CPU producer."""

    kind: str
    tensor: str
    provider: str


@dataclass(frozen=True)
class MissingKernel:
    """A node the provider has no kernel for: it runs on the CPU instead."""

    provider: str
    op_type: str
    node: str


@dataclass
class SessionLog:
    #: provider -> node count, as ORT summarised it
    placement_counts: dict[str, int] = field(default_factory=dict)
    #: provider -> [(op type, node name)], where the log listed them
    placed_nodes: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    copies: list[CopyInsertion] = field(default_factory=list)
    #: (graph, provider) -> copy count from ORT's own warning
    copy_counts: dict[tuple[str, str], int] = field(default_factory=dict)
    missing_kernels: list[MissingKernel] = field(default_factory=list)
    #: nodes ORT moved to the CPU by choice (small shape computations), not for want of a kernel
    cpu_preferred: list[str] = field(default_factory=list)

    @property
    def partitioned(self) -> bool:
        """More than one provider ran nodes: the graph was split."""
        return sum(1 for n in self.placement_counts.values() if n > 0) > 1

    def nodes_on(self, provider: str) -> list[tuple[str, str]]:
        return list(self.placed_nodes.get(provider, []))


def _message(line: str) -> tuple[str, str] | None:
    match = _LINE.search(line)
    if match is None:
        return None
    return match["func"], match["msg"]


def parse_session_log(text: str) -> SessionLog:
    """Every placement, copy and missing-kernel line in `text`; other lines are skipped."""
    log = SessionLog()
    current: str | None = None
    for line in text.splitlines():
        parsed = _message(line)
        if parsed is None:
            continue
        func, msg = parsed
        if "VerifyEachNodeIsAssignedToAnEp" in func:
            placed = _PLACED.match(msg)
            node = _NODE.match(msg)
            if placed:
                current = placed["ep"]
                log.placement_counts[current] = int(placed["n"])
                log.placed_nodes.setdefault(current, [])
            elif node and current is not None:
                log.placed_nodes[current].append((node["op"], node["name"]))
            elif msg.strip() == "Node placements":
                current = None
            continue
        copy = _COPY.search(msg)
        if copy:
            log.copies.append(CopyInsertion(copy["kind"], copy["tensor"].strip(), copy["ep"]))
            continue
        count = _COPY_COUNT.search(msg)
        if count:
            log.copy_counts[(count["graph"], count["ep"])] = int(count["n"])
            continue
        preferred = _CPU_PREFERRED.search(msg)
        if preferred:
            log.cpu_preferred.append(preferred["name"].strip())
            continue
        missing = _NO_KERNEL.search(msg)
        if missing:
            provider = "CUDAExecutionProvider" if missing["ep"] == "CUDA" else missing["ep"]
            log.missing_kernels.append(MissingKernel(provider, missing["op"], missing["name"].strip()))
    return log


def _flat(text: str) -> str:
    return " ".join(text.split())


def session_error_kind(message: str) -> str:
    """What a failed session creation means for the fallback probe.

    `refused`: nodes would run on the CPU (the probe's "yes"); `conflict`: the CPU provider was
    listed explicitly next to the disable flag (a probe bug); `other`: any other failure.
    """
    flat = _flat(message)
    if FALLBACK_REFUSAL in flat:
        return "refused"
    if FALLBACK_CONFLICT in flat:
        return "conflict"
    return "other"


def provider_load_failure(text: str, provider: str = "CUDA") -> str | None:
    """Why a provider's library did not load, from the ERROR/WARNING lines ORT prints for it.

    ORT lists `CUDAExecutionProvider` whenever onnxruntime-gpu is installed, then, at session
    creation, logs these lines and quietly runs on the CPU when the CUDA/cuDNN libraries are missing.
    """
    reasons: list[str] = []
    for line in text.splitlines():
        match = _LINE.search(line)
        if match is None or match["sev"] not in "EW":
            continue
        func, msg = match["func"], match["msg"].strip()
        if match["sev"] == "E" and f"TryGetProviderInfo_{provider}" in func:
            reasons.append(msg.rsplit(" : FAIL : ", 1)[-1])
        elif msg.startswith(f"Failed to create {provider}ExecutionProvider."):
            requirement = msg.split(". ")[1] if ". " in msg else ""
            if requirement.startswith("Require"):
                reasons.append(requirement)
    return "; ".join(reasons) or None
