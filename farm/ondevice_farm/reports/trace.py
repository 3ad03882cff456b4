"""Per-op profiles as Chrome/Perfetto trace JSON (the Trace Event Format), one per job.

ONNX Runtime's profile already is trace events: they are normalised (a process per job, a thread
lane per backend, metadata events naming them, times as numbers). Targets without a trace (CoreML
reports per-op means) get one synthesised inference: the ops laid end to end in execution order
at their mean durations, marked `synthesised` in their args so nobody reads them as a recording.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ondevice_farm.op_rows import op_time_us
from ondevice_farm.reports.compare import backend_name

#: keys every event of a phase must carry (Trace Event Format, "Event Descriptions")
REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    "X": ("name", "ts", "dur", "pid", "tid"),
    "B": ("name", "ts", "pid", "tid"),
    "E": ("ts", "pid", "tid"),
    "i": ("name", "ts", "pid", "tid"),
    "I": ("name", "ts", "pid", "tid"),
    "C": ("name", "ts", "pid", "args"),
    "M": ("name", "pid", "args"),
}
METADATA_NAMES = frozenset(
    {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}
)
KERNEL_SUFFIX = "_kernel_time"


def _meta(name: str, pid: int, value: Any, tid: int | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"name": name, "ph": "M", "pid": pid, "args": {"name": value}}
    if tid is not None:
        event["tid"] = tid
    return event


def _backend(event: dict[str, Any]) -> str:
    """The provider in the event's args, else the one a compiled partition is named after
    (`NnapiExecutionProvider_Nnapi_<hash>_<n>_<n>`)."""
    provider = (event.get("args") or {}).get("provider")
    if not provider:
        head = str(event.get("name") or "").split("_", 1)[0]
        provider = head if head.endswith("ExecutionProvider") else "ORT"
    return backend_name(str(provider))


def _lanes(backends: Iterable[str]) -> dict[str, int]:
    return {backend: tid for tid, backend in enumerate(sorted(set(backends)), start=1)}


def job_trace_events(job: dict[str, Any], pid: int = 1) -> list[dict[str, Any]]:
    """The job's per-op profile as trace events under process `pid`."""
    label = f"{job.get('device')} {job.get('target')} ({job.get('job_id', '?')})"
    recorded = [e for e in job.get("trace_events") or [] if e.get("ts") is not None]
    events: list[dict[str, Any]] = [_meta("process_name", pid, label)]
    if recorded:
        backends = [_backend(e) for e in recorded]
        lanes = _lanes(backends)
        for backend, tid in lanes.items():
            events.append(_meta("thread_name", pid, backend, tid))
        for event, backend in zip(recorded, backends, strict=True):
            name = str(event.get("name") or "?")
            events.append(
                {
                    "name": name.removesuffix(KERNEL_SUFFIX),
                    "cat": str(event.get("cat") or "Node"),
                    "ph": "X",
                    "ts": float(event["ts"]),
                    "dur": float(event.get("dur") or 0.0),
                    "pid": pid,
                    "tid": lanes[backend],
                    "args": dict(event.get("args") or {}),
                }
            )
        return events
    # a placement-only recording has no times to lay out
    ops = [op for op in job.get("ops") or [] if op_time_us(op) is not None]
    lanes = _lanes(backend_name(str(op.get("provider") or "?")) for op in ops)
    for backend, tid in lanes.items():
        events.append(_meta("thread_name", pid, backend, tid))
    ts = 0.0
    for op in ops:
        backend = backend_name(str(op.get("provider") or "?"))
        dur = op_time_us(op) or 0.0  # the table's statistic: the median per run where recorded
        events.append(
            {
                "name": str(op.get("name")),
                "cat": "Node",
                "ph": "X",
                "ts": ts,
                "dur": dur,
                "pid": pid,
                "tid": lanes[backend],
                "args": {
                    "op_name": op.get("op_type"),
                    "provider": op.get("provider"),
                    "synthesised": True,
                    # how the duration was obtained: an iOS op's is an estimate (docs/results.md)
                    "time_source": op.get("time_source", "measured"),
                },
            }
        )
        ts += dur
    return events


def trace_document(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """One trace with a process per job (open it in ui.perfetto.dev or chrome://tracing)."""
    events: list[dict[str, Any]] = []
    for pid, job in enumerate((j for j in jobs if j.get("status") == "ok"), start=1):
        events.extend(job_trace_events(job, pid))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"producer": "farm", "jobs": [j.get("job_id") for j in jobs]},
    }


def validate_trace(document: Any) -> list[str]:
    """What makes `document` not a valid Trace Event Format JSON object; empty when valid."""
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        return ["not an object with a traceEvents array"]
    errors = []
    for index, event in enumerate(document["traceEvents"]):
        if not isinstance(event, dict) or "ph" not in event:
            errors.append(f"event {index}: no ph")
            continue
        phase = event["ph"]
        missing = [k for k in REQUIRED_KEYS.get(phase, ("name",)) if k not in event]
        if missing:
            errors.append(f"event {index} ({phase}): missing {', '.join(missing)}")
        for key in ("ts", "dur"):
            if key in event and not isinstance(event[key], int | float):
                errors.append(f"event {index}: {key} is not a number")
        if phase == "X" and isinstance(event.get("dur"), int | float) and event["dur"] < 0:
            errors.append(f"event {index}: negative dur")
        if phase == "M" and (
            event.get("name") not in METADATA_NAMES or "name" not in (event.get("args") or {})
        ):
            errors.append(f"event {index}: metadata needs a known name and args.name")
        if "args" in event and not isinstance(event["args"], dict):
            errors.append(f"event {index}: args is not an object")
    return errors


def _file_name(job: dict[str, Any]) -> str:
    raw = f"{job.get('device')}-{job.get('target')}-{job.get('job_id')}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", raw) + ".trace.json"


def write_traces(jobs: list[dict[str, Any]], directory: Path) -> list[Path]:
    """One trace file per successful job, and `run.trace.json` with all of them side by side."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for job in jobs:
        if job.get("status") != "ok":
            continue
        path = directory / _file_name(job)
        path.write_text(json.dumps(trace_document([job])))
        written.append(path)
    combined = directory / "run.trace.json"
    combined.write_text(json.dumps(trace_document(jobs)))
    written.append(combined)
    return written
