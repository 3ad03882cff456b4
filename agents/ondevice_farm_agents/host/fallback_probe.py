"""Ask ONNX Runtime, before measuring, which nodes would leave the accelerator.

The probe creates a session with `session.disable_cpu_ep_fallback` = 1 and only the
accelerator's provider listed (listing the CPU provider next to that flag is itself an error).
ORT then refuses the session if any node is assigned to the CPU; its refusal names no node, so
the probe captures ORT's log of the same session creation (missing kernels, copies it added) and
reads the names from there. Nothing here is timed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ondevice_farm.analysis.ort_log import CopyInsertion, MissingKernel, parse_session_log, session_error_kind
from ondevice_farm_agents.host.native_log import VERBOSE, captured_native_log, verbose_ort_logging

DISABLE_CPU_FALLBACK = "session.disable_cpu_ep_fallback"


@dataclass
class ProbeResult:
    #: "clean": every node on the accelerator; "refused": some would run on the CPU;
    #: "failed": the session could not be created for another reason (see `error`)
    outcome: str
    error: str = ""
    missing_kernels: list[MissingKernel] = field(default_factory=list)
    copies: list[CopyInsertion] = field(default_factory=list)
    cpu_preferred: list[str] = field(default_factory=list)

    @property
    def would_fall_back(self) -> list[str]:
        """`OpType node` for each node without a kernel, then the nodes ORT keeps on the CPU by choice."""
        return [f"{m.op_type} {m.node}" for m in self.missing_kernels] + [
            f"{name} (kept on the CPU by ORT)" for name in self.cpu_preferred
        ]

    def note(self, provider: str) -> str:
        if self.outcome == "clean":
            return f"fallback probe ({DISABLE_CPU_FALLBACK}=1): every node accepted by {provider}"
        if self.outcome == "refused":
            named = ", ".join(self.would_fall_back) or "ORT's log named no node"
            return (
                f"fallback probe ({DISABLE_CPU_FALLBACK}=1): ORT refused the session, nodes would run on "
                f"the CPU: {named}; {len(self.copies)} copy node(s) would be added"
            )
        return f"fallback probe ({DISABLE_CPU_FALLBACK}=1) failed: {self.error}"


def read_probe(error: str | None, log_text: str) -> ProbeResult:
    """A probe's outcome from its session error (None: the session was created) and captured log."""
    log = parse_session_log(log_text)
    if error is None:
        outcome, reason = "clean", ""
    elif session_error_kind(error) == "refused":
        outcome, reason = "refused", ""
    else:
        outcome, reason = "failed", error.strip().splitlines()[0]
    return ProbeResult(outcome, reason, log.missing_kernels, log.copies, log.cpu_preferred)


def probe_cpu_fallback(model: Path, provider: str, provider_options: dict[str, str]) -> ProbeResult:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.add_session_config_entry(DISABLE_CPU_FALLBACK, "1")
    options.log_severity_level = VERBOSE
    error: str | None = None
    session: Any = None
    with verbose_ort_logging(), captured_native_log() as log:
        try:
            session = ort.InferenceSession(str(model), options, providers=[(provider, provider_options)])
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            error = str(exc) or type(exc).__name__
    del session
    return read_probe(error, log.text)
