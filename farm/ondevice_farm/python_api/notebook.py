"""How API values show themselves in a notebook (`_repr_html_`), and progress without terminal
escape codes: a notebook's output area is not a terminal."""

from __future__ import annotations

import sys
from html import escape
from typing import Any, TextIO


def html_table(title: str, head: list[str], rows: list[list[str]]) -> str:
    """A titled table for a notebook's output area (`_repr_html_`): plain HTML, escaped."""
    cells = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    table = f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"
    return f"<div><strong>{escape(title)}</strong>{table}</div>"


def figure(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


class LineProgress:
    """Progress as plain lines (no colour, no cursor moves): what a notebook or a log shows well."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stderr
        self.total = 0
        self.done = 0

    def stage(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def jobs_started(self, total: int) -> None:
        self.total = total
        print(f"{total} job(s) queued", file=self.out, flush=True)

    def job_finished(self, job: dict[str, Any]) -> None:
        self.done += 1
        what = job.get("status", "?")
        if what == "ok" and isinstance(job.get("latency_ms"), dict):
            what = f"ok, p50 {job['latency_ms'].get('p50', 0):.3f} ms"
        elif what != "ok" and job.get("error"):
            what = f"{what}: {job['error']}"
        where = job.get("requested") or job.get("device", "?")
        print(
            f"[{self.done}/{self.total}] {where} {job.get('target', '?')}: {what}", file=self.out, flush=True
        )
