"""Energy per inference from a battery's current and voltage sampled during the timed runs.

The unit samples its fuel gauge (`current_now` in µA, `voltage_now` in µV) over an idle window
before the timed runs and over the runs themselves (the native Android runner's `energy` section).
Here, docs/results.md "Energy":

- power of a sample = drawn current x voltage, the drawn current being the reading oriented so
  that discharge is positive: units differ in sign (the kernel's documented convention and Android's
  BatteryManager are negative while discharging; many vendor kernels, e.g. Qualcomm's, positive).
  The orientation is taken from the median reading of both windows, on a unit known not to charge;
- baseline = mean power over the idle window, active = mean power over the timed runs;
- energy per inference (mJ) = (active - baseline) mW x active window s / inferences in it;
- uncertainty (one standard uncertainty) = the standard error of the two means combined with the
  sensor's resolution (its smallest step between readings, a uniform error per reading), scaled
  the same way. It does not cover what else the device did in the windows: the figure is
  `estimated`, the whole device's extra draw under this load.

A cumulative energy counter (the host's RAPL package counter) gets the same windows and the same
baseline subtraction and uncertainty through `counter_energy_estimate`, its readings turned into
intervals of known energy and time.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ondevice_farm.measurement import EnergyEstimate

#: µA x µV = pW; 1e9 pW = 1 mW
PW_PER_MW = 1e9
#: readings below this many µA may come from a unit that reports mA (some vendor kernels)
SUSPECT_MILLIAMP_UA = 5000.0
MIN_SAMPLES_PER_WINDOW = 2


def _floats(value: Any) -> list[float]:
    if not isinstance(value, list):
        return []
    return [float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan for v in value]


def _window(data: dict[str, Any], key: str) -> tuple[float, float]:
    window = data.get(key)
    if not isinstance(window, dict):
        raise ValueError(f"the energy section has no {key!r} window")
    return float(window["start_s"]), float(window["end_s"])


def _resolution_ua(currents: np.ndarray) -> float:
    """The gauge's step: the smallest non-zero difference between distinct readings (0: one value)."""
    steps = np.diff(np.unique(currents))
    return float(steps.min()) if steps.size else 0.0


def _mean_and_error(values: np.ndarray, weights: np.ndarray | None) -> tuple[float, float]:
    """A window's mean power and its standard error; `weights` (a counter's interval lengths)
    make it the time-weighted mean, which for a counter is the window's energy over its time."""
    if weights is None:
        return float(values.mean()), math.sqrt(values.var(ddof=1) / values.size)
    share = weights / weights.sum()
    mean = float((share * values).sum())
    # the weighted form of var(ddof=1) / n: equal weights give exactly that
    error = math.sqrt(values.size / (values.size - 1) * float((share**2 * (values - mean) ** 2).sum()))
    return mean, error


def _loaded_minus_idle(
    idle_mw: np.ndarray,
    active_mw: np.ndarray,
    quantum_mw: float,
    per_s: float,
    weights: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[float, float, float]:
    """Baseline and loaded mean power (mW), and one standard uncertainty of the energy per
    inference: both means' standard errors and the sensor's rounding (`quantum_mw`, already for
    the difference of the means), times `per_s` (the window's seconds per inference)."""
    baseline, idle_error = _mean_and_error(idle_mw, weights[0] if weights else None)
    loaded, active_error = _mean_and_error(active_mw, weights[1] if weights else None)
    return baseline, loaded, math.hypot(idle_error, active_error, quantum_mw) * per_s


def _method(period_ms: float, idle_s: float, active_s: float, inferences: int) -> str:
    return (
        f"battery current_now x voltage_now sampled every {period_ms:g} ms; the mean power over "
        f"{idle_s:.1f} s idle before the timed runs subtracted from the mean over {active_s:.1f} s "
        f"of runs ({inferences} inferences), times that time, divided by the inferences"
    )


def energy_estimate(data: dict[str, Any]) -> EnergyEstimate:
    """The runner's `energy` section (see module docstring) as an estimate, or the reason for none."""
    if data.get("unavailable"):
        return EnergyEstimate(absent=f"the unit's battery could not be read: {data['unavailable']}")
    idle_lo, idle_hi = _window(data, "idle")
    active_lo, active_hi = _window(data, "active")
    inferences = int(data["active"].get("inferences") or 0)
    t = np.asarray(_floats(data.get("t_s")), dtype=np.float64)
    current = np.asarray(_floats(data.get("current_ua")), dtype=np.float64)
    voltage = np.asarray(_floats(data.get("voltage_uv")), dtype=np.float64)
    if not (t.size == current.size == voltage.size):
        raise ValueError("the energy section's t_s, current_ua and voltage_uv differ in length")
    finite = np.isfinite(t) & np.isfinite(current) & np.isfinite(voltage)
    idle = finite & (t >= idle_lo) & (t <= idle_hi)
    active = finite & (t >= active_lo) & (t <= active_hi)
    active_s = active_hi - active_lo
    period_ms = float(data.get("sample_period_ms") or 0.0)
    method = _method(period_ms, idle_hi - idle_lo, active_s, inferences)
    n_idle, n_active = int(idle.sum()), int(active.sum())
    if min(n_idle, n_active) < MIN_SAMPLES_PER_WINDOW or inferences < 1 or active_s <= 0:
        return EnergyEstimate(
            method=method,
            absent=f"too few battery readings ({n_idle} idle, {n_active} during the runs); a longer "
            "idle window or more runs would give some",
            idle_samples=n_idle,
            active_samples=n_active,
        )
    both = idle | active
    discharge_sign = -1.0 if float(np.median(current[both])) < 0 else 1.0
    drawn = current * discharge_sign
    power_mw = drawn * voltage / PW_PER_MW
    idle_mw, active_mw = power_mw[idle], power_mw[active]
    per_s = active_s / inferences
    step_mw = _resolution_ua(current[both]) * float(voltage[both].mean()) / PW_PER_MW
    quantum = step_mw / math.sqrt(12) * math.sqrt(1 / idle_mw.size + 1 / active_mw.size)
    baseline, loaded, uncertainty = _loaded_minus_idle(idle_mw, active_mw, quantum, per_s)
    notes = []
    if bool(np.any(drawn[both] < 0)):
        notes.append(
            "the battery current changed sign during the measurement: something (a charger) "
            "fed the battery part of the time"
        )
    if float(np.median(np.abs(current[both]))) < SUSPECT_MILLIAMP_UA:
        notes.append(
            "current_now read below 5 mA: a unit that reports mA rather than µA would make this "
            "figure 1000 times too small"
        )
    convention = "negative while discharging" if discharge_sign < 0 else "positive while discharging"
    return dataclasses.replace(
        _figure(baseline, loaded, uncertainty, per_s, notes, _unreadable(data), "battery"),
        method=method,
        active_s=active_s,
        inferences=inferences,
        sign_convention=convention,
        idle_samples=n_idle,
        active_samples=n_active,
    )


def energy_document(estimate: EnergyEstimate) -> dict[str, Any]:
    """The job document's `energy` section (run.schema.json)."""
    return {
        "mj_per_inference": estimate.mj_per_inference,
        "uncertainty_mj": estimate.uncertainty_mj,
        "baseline_mw": estimate.baseline_mw,
        "active_mw": estimate.active_mw,
        "active_s": estimate.active_s,
        "inferences": estimate.inferences,
        "samples": {"idle": estimate.idle_samples, "active": estimate.active_samples},
        "sign_convention": estimate.sign_convention or None,
        "method": estimate.method or None,
        "estimated": True,
        "source": "estimated",
        "absent": estimate.absent or None,
        "notes": list(estimate.notes),
    }


#: µJ/s = µW; 1e3 µW = 1 mW
UW_PER_MW = 1e3


def counter_energy_estimate(data: dict[str, Any], counter: str) -> EnergyEstimate:
    """Energy per inference from a cumulative energy counter (host RAPL) read over the same two
    windows: `t_s` and `energy_uj` (wrap-arounds already unrolled) instead of current and voltage.

    Each pair of consecutive readings inside a window is one interval whose power is its energy
    over its time; a window's mean power is the time-weighted mean of its intervals (its energy
    over its time), and the uncertainty is the standard error of those means, as for a battery.
    A counter's rounding (one energy unit, some µJ, at each end of a window) is negligible beside
    that and left out. `counter` names what was read, for the method."""
    idle_lo, idle_hi = _window(data, "idle")
    active_lo, active_hi = _window(data, "active")
    inferences = int(data["active"].get("inferences") or 0)
    t = np.asarray(_floats(data.get("t_s")), dtype=np.float64)
    energy = np.asarray(_floats(data.get("energy_uj")), dtype=np.float64)
    if t.size != energy.size:
        raise ValueError("the energy section's t_s and energy_uj differ in length")
    finite = np.isfinite(t) & np.isfinite(energy)
    t, energy = t[finite], energy[finite]
    starts, ends, dt = t[:-1], t[1:], np.diff(t)
    power_mw = np.divide(np.diff(energy), dt, out=np.zeros_like(dt), where=dt > 0) / UW_PER_MW
    usable = dt > 0
    idle = usable & (starts >= idle_lo) & (ends <= idle_hi)
    active = usable & (starts >= active_lo) & (ends <= active_hi)
    active_s = active_hi - active_lo
    period_ms = float(data.get("sample_period_ms") or 0.0)
    method = (
        f"{counter} read every {period_ms:g} ms; the mean power over {idle_hi - idle_lo:.1f} s idle "
        f"before the timed runs subtracted from the mean over {active_s:.1f} s of runs ({inferences} "
        "inferences), times that time, divided by the inferences; the counter covers everything the "
        "package did in that time, not the model alone"
    )
    n_idle, n_active = int(idle.sum()), int(active.sum())
    if min(n_idle, n_active) < MIN_SAMPLES_PER_WINDOW or inferences < 1 or active_s <= 0:
        return EnergyEstimate(
            method=method,
            absent=f"too few energy counter readings ({n_idle} intervals idle, {n_active} during the "
            "runs); a longer idle window or more runs would give some",
            idle_samples=n_idle,
            active_samples=n_active,
        )
    per_s = active_s / inferences
    baseline, loaded, uncertainty = _loaded_minus_idle(
        power_mw[idle], power_mw[active], 0.0, per_s, weights=(dt[idle], dt[active])
    )
    return dataclasses.replace(
        _figure(baseline, loaded, uncertainty, per_s, [], _unreadable(data), "counter"),
        method=method,
        active_s=active_s,
        inferences=inferences,
        idle_samples=n_idle,
        active_samples=n_active,
    )


def _unreadable(data: dict[str, Any]) -> int:
    return int(data.get("unreadable_samples") or 0)


def _figure(
    baseline: float,
    loaded: float,
    uncertainty: float,
    per_s: float,
    notes: list[str],
    unreadable: int,
    readings: str,
) -> EnergyEstimate:
    """The figure from the two mean powers, with the notes every meter adds."""
    if loaded - baseline <= 2 * uncertainty / per_s:
        notes.append("the runs drew no more than idle within twice the uncertainty")
    if unreadable:
        notes.append(f"{unreadable} {readings} readings failed and were skipped")
    return EnergyEstimate(
        mj_per_inference=(loaded - baseline) * per_s,
        baseline_mw=baseline,
        active_mw=loaded,
        uncertainty_mj=uncertainty,
        notes=tuple(notes),
    )
