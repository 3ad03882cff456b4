"""Every job of a large run, as a table per (model, target) (run_reader.GroupTable): what the
terminal and the HTML report show beside the window of jobs they show in detail."""

from __future__ import annotations

from html import escape
from typing import Any

from rich.table import Table

HEADINGS = ("model", "target", "jobs", "ok", "failed", "devices", "p50 median ms")


def window_note(document: dict[str, Any], how: str) -> str | None:
    """'jobs 1-100 of 30000 shown in detail ...' where the run holds more jobs than are shown;
    `how`: how to see other jobs (an option, a link)."""
    shown = len(document.get("jobs") or [])
    total = int(document.get("jobs_total", shown))
    if shown >= total:
        return None
    first = int(document.get("jobs_offset", 0))
    span = f"{first + 1}-{first + shown}" if shown else "none"
    return (
        f"jobs {span} of {total} shown in detail (by finish time); the per-(model, target) table "
        f"counts them all; {how}"
    )


def _ms(value: Any) -> str:
    return "-" if value is None else f"{float(value):.3f}"


def groups_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="Jobs per model and target (all jobs of the run)", title_justify="left")
    for column in (*HEADINGS, "p50 min-max ms"):
        table.add_column(column, justify="left" if column in ("model", "target") else "right")
    for row in rows:
        p50 = row["p50_ms"]
        table.add_row(
            row["model"],
            row["target"],
            str(row["jobs"]),
            str(row["ok"]),
            str(row["failed"]),
            str(row["devices"]),
            _ms(p50["median"]),
            f"{_ms(p50['min'])}-{_ms(p50['max'])}",
        )
    return table


def groups_html(rows: list[dict[str, Any]], lead_html: str = "") -> str:
    """The table, after `lead_html` (the window note and its page links, already HTML)."""
    head = "".join(
        f"<th data-sort>{escape(c)}</th>"
        for c in (*HEADINGS[:-1], "p50 min ms", "p50 max ms", "first failure")
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{escape(str(v))}</td>"
            for v in (
                row["model"],
                row["target"],
                row["jobs"],
                row["ok"],
                row["failed"],
                row["devices"],
                _ms(row["p50_ms"]["median"]),
                _ms(row["p50_ms"]["min"]),
                _ms(row["p50_ms"]["max"]),
                row["first_failure"] or "",
            )
        )
        + "</tr>"
        for row in rows
    )
    return f"{lead_html}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
