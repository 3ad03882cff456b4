"""The nightly summary on the terminal: each job's verdict with the numbers behind it.

Fits 80 columns: jobs are grouped under their device and target, one row per model, and the
reasons (why a job was not compared, what else changed) follow the table as wrapped lines.
"""

from __future__ import annotations

import textwrap

from rich.console import Console
from rich.markup import escape

from ondevice_farm.analysis.paired_generation import TTFT
from ondevice_farm.nightly.compare import Comparison, JobComparison
from ondevice_farm.nightly.run import NightlyResult

WIDTH = 80
MODEL_WIDTH = 20
COLUMNS = (
    f"{'model':<{MODEL_WIDTH}} {'base ms':>8} {'p50 ms':>8} {'change':>7} {'95% CI':>11} {'adj p':>7}"
    "  verdict"
)
VERDICT_STYLE = {
    "regressed": "red",
    "failed": "red",
    "missing": "red",
    "improved": "green",
    "unchanged": "",
    "not compared": "yellow",
    "inconclusive": "yellow",
}


def _ms(value: float) -> str:
    return f"{value:.4g}"


def _name(model: str) -> str:
    return model if len(model) <= MODEL_WIDTH else model[: MODEL_WIDTH - 1] + "~"


def row(entry: JobComparison) -> str:
    """One job's line of the table (plain text, no markup)."""
    model = _name(entry.key[0])
    latency = entry.latency
    if entry.paired is not None:
        paired = entry.paired
        cells = (
            _ms(paired.baseline_p50_ms),
            _ms(paired.candidate_p50_ms),
            f"{(paired.ratio - 1) * 100:+.1f}%",
            f"{paired.ci_low:.2f}-{paired.ci_high:.2f}x",
            "paired",
        )
    elif entry.paired_metrics is not None:  # a changed generation job: TTFT here, both in its notes
        ttft = entry.paired_metrics[TTFT]
        cells = (
            _ms(ttft.baseline),
            _ms(ttft.candidate),
            f"{(ttft.paired.ratio - 1) * 100:+.1f}%",
            f"{ttft.paired.ci_low:.2f}-{ttft.paired.ci_high:.2f}x",
            "paired",
        )
    elif latency is None:
        cells = ("-", "-" if entry.p50 is None else _ms(entry.p50), "-", "-", "-")
    else:
        cells = (
            _ms(latency.baseline_p50),
            _ms(latency.new_p50),
            f"{(latency.ratio - 1) * 100:+.1f}%",
            f"{latency.ci_low:.2f}-{latency.ci_high:.2f}x",
            "-" if entry.p_adjusted is None else f"{entry.p_adjusted:.2g}",
        )
    base, now, change, interval, p_adj = cells
    return f"{model:<{MODEL_WIDTH}} {base:>8} {now:>8} {change:>7} {interval:>11} {p_adj:>7}  {entry.verdict}"


def notes(entry: JobComparison) -> list[str]:
    """Why the verdict is what it is, beyond the numbers in the row."""
    lines: list[str] = []
    if entry.reason:
        lines.append(entry.reason)
    lines += [f.message for f in entry.findings if f.kind != "latency"]
    if entry.latency is not None and entry.latency.drift_from == "device":
        lines.append("night-to-night drift taken from the device's other jobs: its own history is short")
    return lines


def print_comparison(comparison: Comparison, console: Console) -> None:
    groups: dict[tuple[str, str], list[JobComparison]] = {}
    for entry in comparison.jobs:
        groups.setdefault((entry.key[1], entry.key[2]), []).append(entry)
    console.print(COLUMNS, style="bold", highlight=False)
    for (device, target), entries in sorted(groups.items()):
        console.print(escape(f"{device} {target}"), style="dim", highlight=False)
        for entry in entries:
            style = VERDICT_STYLE.get(entry.verdict, "")
            console.print(escape(row(entry)), style=style or None, highlight=False)
    reasons = [(e, n) for e in comparison.jobs for n in notes(e)]
    if reasons:
        console.print("why:", style="bold", highlight=False)
    for entry, note in reasons:
        text = f"{entry.key[0]} ({entry.key[1]} {entry.key[2]}): {note}"
        for line in textwrap.wrap(text, WIDTH - 2, initial_indent="  ", subsequent_indent="    "):
            console.print(escape(line), highlight=False)
    policy = comparison.policy
    judged = sum(1 for e in comparison.jobs if e.p_adjusted is not None)
    paired = sum(1 for e in comparison.jobs if e.paired is not None or e.paired_metrics is not None)
    method = (
        f"session-level test against history, {judged} of {len(comparison.jobs)} job(s) judged; "
        f"Benjamini-Hochberg at {policy.alpha:g}; a regression is also at least {policy.min_effect:.0%} "
        "slower"
    )
    if paired:
        method += (
            f"; {paired} changed job(s) judged by the paired test against their last good artifact "
            "run interleaved tonight (Bonferroni across them; a generation job's TTFT and decode "
            "tokens/s are two tests)"
        )
    for line in textwrap.wrap(method, WIDTH):
        console.print(line, style="dim", highlight=False)


def print_summary(result: NightlyResult, console: Console | None = None) -> None:
    console = console or Console()
    run, comparison = result.run, result.comparison
    baseline = comparison.baseline_run or "none (first run)"
    tally = result.tally
    header = f"nightly {run['suite']} run {run['run_id']}: {run['status']}, {tally.ok}/{tally.total} jobs ok"
    console.print(escape(header), highlight=False)
    console.print(escape(f"previous run {baseline}; each job against its last success"), highlight=False)
    print_comparison(comparison, console)
    count = len(comparison.regressions)
    console.print(f"[red]{count} regression(s)[/red]" if count else "[green]no regressions[/green]")
