"""The terminal's lines for a job's warm start and sustained run."""

from __future__ import annotations

from typing import Any

from rich.text import Text


def _ms(value: Any) -> str:
    return "-" if value is None else f"{float(value):.3f} ms"


def sustained_lines(job: dict[str, Any]) -> Text:
    text = Text()
    if job.get("warm_load_ms") is not None:
        # documents stored before warm_load_method existed measured it in the same process
        method = job.get("warm_load_method") or "second session in the same process"
        text.append(
            f"  load {float(job.get('load_ms') or 0):.1f} ms first, {float(job['warm_load_ms']):.1f} ms warm "
            f"(a {method})\n"
        )
    sustained = job.get("sustained")
    if not sustained:
        return text
    s = sustained["summary"]
    line = (
        f"  sustained {sustained['duration_s']:g} s ({s['inferences']} inferences, "
        f"{len(sustained['windows'])} windows of {sustained['window_s']:g} s): p50 "
        f"{_ms(s['first_p50_ms'])} in the first {s['span_s']:.0f} s -> {_ms(s['steady_p50_ms'])} at the end"
    )
    if s.get("slowdown") is not None:
        line += f" ({s['slowdown']:.2f}x)"
    if s.get("time_to_first_throttle_s") is not None:
        line += f"; throttles at {s['time_to_first_throttle_s']:.0f} s ({s['throttle_signal']})"
    else:
        line += "; no throttling seen"
    if s.get("start_cpu_freq_mhz") is not None and s.get("end_cpu_freq_mhz") is not None:
        line += f"; CPU {s['start_cpu_freq_mhz']:.0f} -> {s['end_cpu_freq_mhz']:.0f} MHz"
    if s.get("start_gpu_freq_mhz") is not None and s.get("end_gpu_freq_mhz") is not None:
        line += f"; GPU {s['start_gpu_freq_mhz']:.0f} -> {s['end_gpu_freq_mhz']:.0f} MHz"
    if s.get("max_temperature_c") is not None:
        line += f"; max {s['max_temperature_c']:.1f} °C"
    if s.get("thermal_status_reached") is not None:
        line += f"; thermal state reached {s['thermal_status_reached']}"
    if s.get("energy_mj_per_inference") is not None:
        line += f"; {s['energy_mj_per_inference']:.3f} mJ/inference"
    text.append(line + "\n")
    if sustained.get("unavailable"):
        text.append("  not exposed here: " + "; ".join(sustained["unavailable"]) + "\n", style="dim")
    return text
