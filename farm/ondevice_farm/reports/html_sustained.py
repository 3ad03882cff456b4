"""The report's "Sustained load" section: latency and temperature over time, and each job's summary."""

from __future__ import annotations

from ondevice_farm.reports.compare import Column
from ondevice_farm.reports.html_sections import _num, _table, e
from ondevice_farm.reports.svg_sustained import sustained_plots


def has_sustained(columns: list[Column]) -> bool:
    return any(c.ok and c.job.get("sustained") for c in columns)


def sustained(columns: list[Column]) -> str:
    jobs = [(c.label, c.job["sustained"]) for c in columns if c.ok and c.job.get("sustained")]
    rows = []
    for column in columns:
        if not (column.ok and column.job.get("sustained")):
            continue
        section = column.job["sustained"]
        s = section["summary"]
        throttle = s.get("time_to_first_throttle_s")
        rows.append(
            [
                e(column.label),
                f"{section['duration_s']:g} s",
                _num(s.get("first_p50_ms"), 3),
                _num(s.get("steady_p50_ms"), 3),
                _num(s.get("slowdown"), 2),
                "none" if throttle is None else f"{throttle:.0f} s ({e(s.get('throttle_signal'))})",
                _num(s.get("max_temperature_c"), 1),
                e(s.get("thermal_status_reached") or "-"),
                _num(s.get("energy_mj_per_inference"), 3),
                _num(column.job.get("load_ms"), 1) + " / " + _num(column.job.get("warm_load_ms"), 1),
            ]
        )
    table = _table(
        [
            "job",
            "ran",
            "p50 first ms",
            "p50 end ms",
            "slowdown",
            "first throttle",
            "max °C",
            "thermal state",
            "mJ/inf",
            "load first / warm ms",
        ],
        rows,
        numeric={2, 3, 4, 6, 8},
    )
    missing = sorted({u for _, s in jobs for u in s.get("unavailable") or []})
    note = (
        f'<p class="muted">Measured on the units. Not exposed on them: {e("; ".join(missing))}.</p>'
        if missing
        else '<p class="muted">Measured on the units.</p>'
    )
    return sustained_plots(jobs) + table + note
