"""FarmRunner's sustained phase (the result's `sustained` object) as a `SustainedTrace`.

The app reads `ProcessInfo.thermalState` at the start and at the end of each window; that state
is the trace's thermal status, which `ondevice_farm.analysis.sustained` treats as the throttle
signal once it leaves nominal. iOS shows apps no CPU frequencies or temperatures: the result's
`unavailable` list says so, and the trace carries it on.
"""

from __future__ import annotations

from typing import Any

from ondevice_farm_agents.base import SustainedTrace, SustainedWindow, TelemetrySample


def _telemetry(raw: Any) -> TelemetrySample:
    state = raw.get("thermal_state") if isinstance(raw, dict) else None
    return TelemetrySample(thermal_status=str(state) if state is not None else None)


def sustained_trace(data: dict[str, Any]) -> SustainedTrace:
    """`data` passed the result schema (`parse_result`), so its fields are there and typed."""
    windows = [
        SustainedWindow(
            float(w["start_s"]),
            float(w["end_s"]),
            [float(s) for s in w["samples_ms"]],
            _telemetry(w["telemetry"]),
        )
        for w in data["windows"]
    ]
    return SustainedTrace(
        float(data["duration_s"]),
        float(data["window_s"]),
        windows,
        _telemetry(data["start"]),
        [str(u) for u in data["unavailable"]],
    )
