"""The nightly summary on the terminal: jobs, and what regressed against the baseline."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from farm.nightly.run import NightlyResult


def print_summary(result: NightlyResult, console: Console | None = None) -> None:
    console = console or Console()
    run, comparison = result.run, result.comparison
    ok = sum(1 for j in run["jobs"] if j["status"] == "ok")
    console.print(
        f"nightly [bold]{run['suite']}[/bold] run {run['run_id']}: {run['status']}, "
        f"{ok}/{len(run['jobs'])} jobs ok; baseline {comparison.baseline_run or 'none (first run)'}"
    )
    table = Table(title="Against the baseline")
    for column in ("model", "device", "target", "status", "p50 ms", "findings"):
        table.add_column(column)
    latest = {
        (j["model"]["name"], str(j.get("requested") or j["device"]), j["target"]): j for j in run["jobs"]
    }
    for entry in comparison.jobs:
        job = latest.get(entry.key)
        p50 = f"{job['latency_ms']['p50']:.3f}" if job and job["status"] == "ok" else "-"
        status = f"[red]{entry.status}[/red]" if entry.regression else entry.status
        findings = "; ".join(
            ("[red]" if f.regression else "[green]") + f.message + ("[/red]" if f.regression else "[/green]")
            for f in entry.findings
        )
        if job is not None and job["status"] != "ok":
            findings = findings or f"[red]{job.get('error')}[/red]"
        table.add_row(*entry.key, status, p50, findings or "")
    console.print(table)
    count = len(comparison.regressions)
    console.print(f"[red]{count} regression(s)[/red]" if count else "[green]no regressions[/green]")
