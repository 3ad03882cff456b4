"""The reference check's state as every reader of a job document sees it: passed, failed, or
not_compared with a reason. Documents stored before the three states (a bare `passed` boolean)
read the same way, so old runs render as they did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PASSED, FAILED, NOT_COMPARED = "passed", "failed", "not_compared"
STATES = (PASSED, FAILED, NOT_COMPARED)
#: how the terminal, the HTML report and findings write each state
LABELS = {PASSED: "pass", FAILED: "FAIL", NOT_COMPARED: "not compared"}


@dataclass(frozen=True)
class ReferenceState:
    state: str
    #: not_compared: why nothing was compared; failed: what failed, output by output
    reason: str | None = None

    @property
    def label(self) -> str:
        return LABELS[self.state]


def reference_state(job: dict[str, Any]) -> ReferenceState:
    if job.get("status") != "ok":
        return ReferenceState(NOT_COMPARED, f"the job failed: {job.get('error') or 'no result'}")
    reference = job.get("reference")
    if not isinstance(reference, dict):
        return ReferenceState(NOT_COMPARED, "the job has no reference check")
    reason = reference.get("reason")
    state = reference.get("status")
    outputs, missing = reference.get("outputs") or {}, reference.get("missing_outputs") or []
    if state in STATES:
        if state == FAILED and not isinstance(reason, str):
            reason = _old_failure(outputs, missing)
        return ReferenceState(state, reason if isinstance(reason, str) else None)
    passed = reference.get("passed")
    if passed is True:
        return ReferenceState(PASSED)
    if not outputs and missing:
        # written before not_compared existed: a runner without outputs "missed" every output
        return ReferenceState(NOT_COMPARED, "the runner returned no outputs to compare")
    if passed is False:
        return ReferenceState(FAILED, _old_failure(outputs, missing))
    return ReferenceState(NOT_COMPARED, "the job has no reference verdict")


def _old_failure(outputs: dict[str, Any], missing: list[str]) -> str:
    snrs = [(name, o.get("snr_db")) for name, o in outputs.items() if isinstance(o, dict)]
    known = [(n, s) for n, s in snrs if isinstance(s, int | float)]
    parts = []
    if known:
        name, snr = min(known, key=lambda x: x[1])
        parts.append(f"worst output {name} at {snr:.1f} dB SNR")
    parts += [f"{name}: missing from the device's outputs" for name in missing]
    return "; ".join(parts) or "outside the tolerance"
