"""The report's "Energy" section: each job's energy per inference, or why it has none."""

from __future__ import annotations

from ondevice_farm.reports.compare import Column
from ondevice_farm.reports.energy_text import energy_summary
from ondevice_farm.reports.html_sections import e


def has_energy(columns: list[Column]) -> bool:
    return any(c.ok and c.job.get("energy") for c in columns)


def energy(columns: list[Column]) -> str:
    items = []
    for column in columns:
        section = column.job.get("energy") if column.ok else None
        if not section:
            continue
        method = f'<br><span class="muted">{e(section["method"])}</span>' if section.get("method") else ""
        items.append(f"<li><b>{e(column.label)}</b>: {e(energy_summary(column.job))}{method}</li>")
    return (
        f"<ul>{''.join(items)}</ul>"
        '<p class="muted">Estimated: the whole device\'s extra draw while the model ran (battery current x '
        "voltage, the idle draw before the timed runs subtracted), not the model's alone.</p>"
    )
