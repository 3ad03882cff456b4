"""`farm gc`: remove what the retention policy does not keep (docs/fleet.md, "Caches and retention")."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ondevice_farm.cli.context import CliState, handles_errors
from ondevice_farm.gc.policy import DEFAULT_KEEP_DAYS, DEFAULT_KEEP_RUNS, RetentionPolicy
from ondevice_farm.gc.sizes import format_bytes, parse_bytes

F = TypeVar("F", bound=Callable[..., Any])


def policy_options(prefix: str = "") -> Callable[[F], F]:
    """--keep-runs, --keep-days and --max-bytes (`prefix`: `gc-` for `farm serve`), each also
    from its FARM_GC_* variable."""

    def decorate(func: F) -> F:
        options = [
            click.option(
                f"--{prefix}keep-runs",
                "keep_runs",
                type=int,
                default=DEFAULT_KEEP_RUNS,
                show_default=True,
                envvar="FARM_GC_KEEP_RUNS",
                help="Keep the runs holding each series' newest N successful jobs (a series: one job "
                "of a suite or of plain submits; the nightly reads the last 10).",
            ),
            click.option(
                f"--{prefix}keep-days",
                "keep_days",
                type=float,
                default=DEFAULT_KEEP_DAYS,
                show_default=True,
                envvar="FARM_GC_KEEP_DAYS",
                help="Keep runs younger than this, and cache entries used within it.",
            ),
            click.option(
                f"--{prefix}max-bytes",
                "max_bytes",
                envvar="FARM_GC_MAX_BYTES",
                help="Then remove more (least recently used, then runs kept only for their age) until "
                "the caches hold at most this: 50G, 500M, 50Gi, or bytes.",
            ),
        ]
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


def policy_from(keep_runs: int, keep_days: float, max_bytes: str | None, prefix: str = "") -> RetentionPolicy:
    """The policy `policy_options(prefix)` asked for, checked."""
    limit = parse_bytes(max_bytes, f"--{prefix}max-bytes") if max_bytes else None
    return RetentionPolicy(keep_runs=keep_runs, keep_days=keep_days, max_bytes=limit).check(prefix)


@click.command()
@policy_options()
@click.option("--dry-run", is_flag=True, help="List what would go and how much; remove nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.pass_obj
@handles_errors
def gc(
    state: CliState, keep_runs: int, keep_days: float, max_bytes: str | None, dry_run: bool, as_json: bool
) -> None:
    """Remove old runs and cache entries the retention policy does not keep. Safe while the
    controller runs: what a job uses is leased, and an entry goes in one rename."""
    from ondevice_farm.gc.schedule import collect_once, summary_line

    policy = policy_from(keep_runs, keep_days, max_bytes)
    if not as_json:
        click.echo(f"reading {state.home.root} and its store", err=True)
    outcome = collect_once(state.home, state.store, policy, dry_run=dry_run)
    plan = outcome.plan
    removals = plan.removals if outcome.result is None else outcome.result.removed
    if as_json:
        document = {
            "dry_run": dry_run,
            "policy": {
                "keep_runs": policy.keep_runs,
                "keep_days": policy.keep_days,
                "max_bytes": policy.max_bytes,
            },
            "kept_runs": plan.kept_runs,
            "cache_bytes_before": plan.cache_bytes,
            "over_max_bytes": plan.over_max_bytes,
            "removals": [
                {"kind": r.kind, "name": r.name, "size_bytes": r.size_bytes, "reason": r.reason}
                for r in removals
            ],
            "spared": [] if outcome.result is None else [r.name for r in outcome.result.spared],
            "size_provenance": {
                "cache entries": "measured (blocks on disk)",
                "runs": "estimated (documents' length)",
            },
        }
        sys.stdout.write(json.dumps(document) + "\n")
        return
    if dry_run:
        for removal in removals:
            size = format_bytes(removal.size_bytes)
            click.echo(f"{removal.kind:<16} {size:>9}  {removal.name}  ({removal.reason})")
    totals: dict[str, tuple[int, int]] = {}
    for removal in removals:
        count, total = totals.get(removal.kind, (0, 0))
        totals[removal.kind] = (count + 1, total + removal.size_bytes)
    for kind, (count, total) in totals.items():
        click.echo(f"  {kind:<16} {count:>6}  {format_bytes(total):>9}")
    click.echo(summary_line(outcome))
    click.echo(
        f"kept {plan.kept_runs} run(s); caches held {format_bytes(plan.cache_bytes)} before"
        + (f"; {plan.leased} entr(ies) leased by running jobs" if plan.leased else "")
    )
