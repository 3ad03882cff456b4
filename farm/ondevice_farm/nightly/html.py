"""The nightly verdict as one self-contained HTML page: every job with the numbers behind it."""

from __future__ import annotations

import html
from typing import Any

from ondevice_farm.nightly.compare import Comparison, JobComparison
from ondevice_farm.nightly.report import notes

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; } th, td { padding: 4px 10px; border-bottom: 1px solid #ddd; }
th { text-align: left; background: #f4f4f4; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.regressed, .failed, .missing { color: #b00020; font-weight: 600; } .improved { color: #1b7f3b; }
.not-compared { color: #8a6d00; } .why { color: #555; font-size: 13px; } .method { color: #666; }
"""
HEADERS = (
    "model",
    "device",
    "target",
    "baseline p50 ms",
    "p50 ms",
    "change",
    "95% CI (ratio)",
    "p",
    "adjusted p",
    "sessions",
    "verdict",
    "why",
)


def _e(value: object) -> str:
    return html.escape(str(value))


def _cells(entry: JobComparison) -> list[tuple[str, bool]]:
    latency = entry.latency
    numbers: list[tuple[str, bool]]
    if latency is None:
        now = "-" if entry.p50 is None else f"{entry.p50:.4g}"
        numbers = [("-", True), (now, True)] + [("-", True)] * 5
    else:
        numbers = [
            (f"{latency.baseline_p50:.4g}", True),
            (f"{latency.new_p50:.4g}", True),
            (f"{(latency.ratio - 1) * 100:+.1f}%", True),
            (f"{latency.ci_low:.3f}-{latency.ci_high:.3f}", True),
            (f"{latency.p_slower:.2g}", True),
            ("-" if entry.p_adjusted is None else f"{entry.p_adjusted:.2g}", True),
            (f"{latency.sessions_baseline} / {latency.sessions_new}", True),
        ]
    model, device, target = entry.key
    return [(model, False), (device, False), (target, False), *numbers, (entry.verdict, False)]


def render_nightly(run: dict[str, Any], comparison: Comparison) -> str:
    rows = []
    for entry in comparison.jobs:
        css = entry.verdict.replace(" ", "-")
        cells = "".join(
            f'<td class="{"n" if numeric else ""}">{_e(text)}</td>' for text, numeric in _cells(entry)
        )
        why = "<br>".join(_e(n) for n in notes(entry))
        rows.append(f'<tr class="{css}">{cells}<td class="why">{why}</td></tr>')
    policy = comparison.policy
    counts = run["job_counts"]
    head = "".join(f"<th>{_e(h)}</th>" for h in HEADERS)
    title = f"farm nightly {run['suite']}: run {run['run_id']}"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{_e(title)}</h1>"
        f"<p>{_e(run['status'])}, {counts['ok']}/{counts['total']} jobs ok; "
        f"{len(comparison.regressions)} regression(s); "
        f"previous run {_e(comparison.baseline_run or 'none (first run)')}; each job is compared with the "
        "last run in which it succeeded.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f"<p class='method'>Session-level test (Kalibera &amp; Jones 2013): the log p50s of the measurement "
        "sessions, with night-to-night drift estimated from each job's history; p-values adjusted "
        f"across the "
        f"suite by Benjamini-Hochberg at {policy.alpha:g}; a regression is also at least "
        f"{policy.min_effect:.0%} slower. Sessions: baseline / this run.</p></body></html>\n"
    )
