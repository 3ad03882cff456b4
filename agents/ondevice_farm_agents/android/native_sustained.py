"""The native runner's sustained phase (`result.json` → `sustained`) as a `SustainedTrace`.

The runner reads the unit's own sysfs at the start and at the end of each window: CPU frequencies,
thermal zones, and the battery's power draw (|current_now| x voltage_now). Energy is that power
integrated over the windows (trapezoids between window edges): the whole device's draw, sampled
once a window, so a coarse figure; docs/results.md says so beside it.
"""

from __future__ import annotations

import math
from typing import Any

from ondevice_farm.errors import DeviceError
from ondevice_farm_agents.base import SustainedTrace, SustainedWindow, TelemetrySample

UJ_PER_MJ = 1000.0


def _floats(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    return {str(k): float(v) for k, v in value.items() if isinstance(v, int | float) and math.isfinite(v)}


def _power(telemetry: Any) -> float | None:
    value = telemetry.get("power_mw") if isinstance(telemetry, dict) else None
    return float(value) if isinstance(value, int | float) and math.isfinite(value) and value >= 0 else None


def sustained_trace(data: dict[str, Any]) -> SustainedTrace:
    windows_raw = data.get("windows")
    if not isinstance(windows_raw, list):
        raise DeviceError("the native runner's sustained result has no 'windows' list")
    start_raw = data.get("start") or {}
    power_before, t_before = _power(start_raw), 0.0
    energy: float | None = 0.0 if power_before is not None else None
    windows = []
    for entry in windows_raw:
        telemetry = entry.get("telemetry") or {}
        end_s = float(entry["end_s"])
        power = _power(telemetry)
        if energy is not None and power is not None and power_before is not None:
            energy += (power_before + power) / 2 * (end_s - t_before) * UJ_PER_MJ
        else:
            energy = None
        power_before, t_before = power, end_s
        windows.append(
            SustainedWindow(
                float(entry["start_s"]),
                end_s,
                [float(s) for s in entry.get("samples_ms") or []],
                TelemetrySample(
                    _floats(telemetry.get("cpu_freq_mhz")),
                    _floats(telemetry.get("temperatures_c")),
                    None,
                    energy,
                    _floats(telemetry.get("gpu_freq_mhz")),
                ),
            )
        )
    start = TelemetrySample(
        _floats(start_raw.get("cpu_freq_mhz")),
        _floats(start_raw.get("temperatures_c")),
        None,
        0.0 if _power(start_raw) is not None else None,
        _floats(start_raw.get("gpu_freq_mhz")),
    )
    unavailable = [str(u) for u in data.get("unavailable") or []]
    return SustainedTrace(float(data["duration_s"]), float(data["window_s"]), windows, start, unavailable)
