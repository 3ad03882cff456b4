"""What a sustained run shows: latency and telemetry over time, and the throttling curve.

Definitions (docs/results.md, "Sustained runs"):
- the *first span* is the first min(60 s, duration / 4) of the run, the *steady span* the last
  as long; `first_p50_ms` and `steady_p50_ms` are the medians of the inferences in each (numpy's
  linear-interpolation percentile, as for the timed runs), `slowdown` their ratio;
- the run *throttles* at the end of the first window where, for it and the next window, the
  window's p50 exceeds `first_p50_ms` by more than `THROTTLE_LATENCY_RISE`, or where the mean CPU
  frequency falls below `1 - THROTTLE_FREQUENCY_DROP` of its value at the start, or where the
  platform's thermal status leaves nominal; `throttle_signal` says which came first;
- energy per inference is the energy counter's increase over the run divided by its inferences,
  where the platform exposes a counter (host: RAPL package energy, which counts everything the
  package did in that time, not the model alone).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ondevice_farm.measurement import SustainedTrace, SustainedWindow, TelemetrySample

FIRST_SPAN_MAX_S = 60.0
THROTTLE_LATENCY_RISE = 0.10
THROTTLE_FREQUENCY_DROP = 0.10
NOMINAL_STATUSES = frozenset({"nominal", "none", "normal", "ok"})
UJ_PER_MJ = 1000.0


def _p(samples: list[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(samples, dtype=np.float64), q)) if samples else None


def _mean_freq(sample: TelemetrySample) -> float | None:
    values = list(sample.cpu_freq_mhz.values())
    return float(np.mean(values)) if values else None


def _gpu_freq(sample: TelemetrySample) -> float | None:
    """The fastest GPU clock (a phone has one GPU; several devfreq entries are its domains)."""
    return max(sample.gpu_freq_mhz.values()) if sample.gpu_freq_mhz else None


def _window_document(window: SustainedWindow) -> dict[str, Any]:
    t = window.telemetry
    return {
        "start_s": round(window.start_s, 3),
        "end_s": round(window.end_s, 3),
        "inferences": len(window.samples_ms),
        "p50_ms": _p(window.samples_ms, 50),
        "p90_ms": _p(window.samples_ms, 90),
        "p99_ms": _p(window.samples_ms, 99),
        "cpu_freq_mhz": _mean_freq(t),
        "gpu_freq_mhz": _gpu_freq(t),
        "max_temperature_c": max(t.temperatures_c.values()) if t.temperatures_c else None,
        "temperatures_c": dict(t.temperatures_c),
        "thermal_status": t.thermal_status,
    }


def _span(windows: list[SustainedWindow], lo_s: float, hi_s: float) -> list[float]:
    return [
        s for w in windows if w.start_s >= lo_s - 1e-9 and w.end_s <= hi_s + 1e-9 for s in w.samples_ms
    ] or [s for w in windows[:1] for s in w.samples_ms]


def _throttle(trace: SustainedTrace, first_p50: float | None) -> tuple[float | None, str | None]:
    windows = trace.windows
    start_freq = _mean_freq(trace.start)
    for index, window in enumerate(windows):
        status = window.telemetry.thermal_status
        if status is not None and status.lower() not in NOMINAL_STATUSES:
            return window.end_s, "thermal"
        freq = _mean_freq(window.telemetry)
        if start_freq and freq is not None and freq < start_freq * (1 - THROTTLE_FREQUENCY_DROP):
            return window.end_s, "frequency"
        if first_p50 and index + 1 < len(windows):
            rise = first_p50 * (1 + THROTTLE_LATENCY_RISE)
            p_now, p_next = _p(window.samples_ms, 50), _p(windows[index + 1].samples_ms, 50)
            if p_now is not None and p_next is not None and p_now > rise and p_next > rise:
                return window.end_s, "latency"
    return None, None


def sustained_document(trace: SustainedTrace) -> dict[str, Any]:
    windows = trace.windows
    run_s = windows[-1].end_s if windows else 0.0
    span = min(FIRST_SPAN_MAX_S, run_s / 4) if run_s else 0.0
    first = _span(windows, 0.0, span)
    steady = _span(list(reversed(windows)), run_s - span, run_s) if windows else []
    first_p50, steady_p50 = _p(first, 50), _p(steady, 50)
    throttle_s, signal = _throttle(trace, first_p50)
    inferences = sum(len(w.samples_ms) for w in windows)
    temps = [t for w in windows for t in w.telemetry.temperatures_c.values()]
    statuses = [w.telemetry.thermal_status for w in windows if w.telemetry.thermal_status]
    # the state reached is the last one past nominal, where the run left nominal at all
    statuses = [s for s in statuses if s.lower() not in NOMINAL_STATUSES] or statuses
    energy = None
    if windows and trace.start.energy_uj is not None and windows[-1].telemetry.energy_uj is not None:
        used_uj = windows[-1].telemetry.energy_uj - trace.start.energy_uj
        energy = used_uj / UJ_PER_MJ / inferences if inferences else None
    return {
        "source": "measured",
        "duration_s": trace.duration_s,
        "window_s": trace.window_s,
        "windows": [_window_document(w) for w in windows],
        "summary": {
            "inferences": inferences,
            "throughput_ips": inferences / run_s if run_s else None,
            "span_s": span,
            "first_p50_ms": first_p50,
            "steady_p50_ms": steady_p50,
            "slowdown": steady_p50 / first_p50 if first_p50 and steady_p50 is not None else None,
            "time_to_first_throttle_s": throttle_s,
            "throttle_signal": signal,
            "start_cpu_freq_mhz": _mean_freq(trace.start),
            "end_cpu_freq_mhz": _mean_freq(windows[-1].telemetry) if windows else None,
            "start_gpu_freq_mhz": _gpu_freq(trace.start),
            "end_gpu_freq_mhz": _gpu_freq(windows[-1].telemetry) if windows else None,
            "max_temperature_c": max(temps) if temps else None,
            "thermal_status_reached": statuses[-1] if statuses else None,
            "energy_mj_per_inference": energy,
        },
        "unavailable": list(trace.unavailable),
    }
