"""`farm nightly --pushgateway URL`: push the summary of a finished batch run.

Prometheus's convention for batch jobs: the job pushes once when it ends, to a group keyed by
job and suite, and always pushes its last-run time; the last-success time is pushed only by a
run that succeeded, and pushing with POST (which replaces only the metric names sent) keeps
the previous success visible after a failed run. Alert on
`time() - farm_nightly_last_success_timestamp_seconds`.

Only run-level figures are pushed: the per-(model, device, target) results are `farm serve`'s
(`/metrics`), and a second copy of them here would count twice against the series budget
(docs/metrics.md, "Series budget").
"""

from __future__ import annotations

import time
import urllib.error
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, pushadd_to_gateway

from ondevice_farm.errors import FarmError
from ondevice_farm.run_tally import RunTally

PUSH_JOB = "farm_nightly"
DEFAULT_SUITE = "default"
DEFAULT_PUSH_TIMEOUT_S = 10.0


def summary_registry(run_document: dict[str, Any], tally: RunTally, now: float) -> CollectorRegistry:
    """The metrics one run pushes, on a registry of their own."""
    registry = CollectorRegistry()
    succeeded = run_document.get("status") == "complete" and tally.statuses.get("failed", 0) == 0

    Gauge(
        "farm_nightly_last_run_timestamp_seconds", "Unix time the last nightly run ended.", registry=registry
    ).set(now)
    if succeeded:
        Gauge(
            "farm_nightly_last_success_timestamp_seconds",
            "Unix time the last nightly run with every job ok ended.",
            registry=registry,
        ).set(now)
    if tally.wall_s is not None:
        duration = Gauge(
            "farm_nightly_duration_seconds", "Wall time of the last nightly run.", registry=registry
        )
        duration.set(tally.wall_s)
    counts = Gauge(
        "farm_nightly_jobs", "Jobs of the last nightly run by outcome.", ["status"], registry=registry
    )
    for status, count in sorted(tally.statuses.items()):
        counts.labels(status).set(count)

    checks = Gauge(
        "farm_nightly_reference_checks",
        "Successful jobs of the last nightly run by reference check state (simulated units' left out).",
        ["state"],
        registry=registry,
    )
    for state, count in tally.reference_states.items():
        checks.labels(state).set(count)
    return registry


def push_run_summary(
    url: str,
    run_document: dict[str, Any],
    tally: RunTally,
    *,
    timeout_s: float = DEFAULT_PUSH_TIMEOUT_S,
    now: float | None = None,
) -> None:
    """Push the summary of a finished run to the Pushgateway at `url` (group job=farm_nightly, suite)."""
    suite = str(run_document.get("suite") or DEFAULT_SUITE)
    registry = summary_registry(run_document, tally, time.time() if now is None else now)
    try:
        pushadd_to_gateway(
            url, job=PUSH_JOB, registry=registry, grouping_key={"suite": suite}, timeout=timeout_s
        )
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise FarmError(
            f"cannot push the nightly summary to {url}: {reason}",
            hint="check --pushgateway (e.g. http://127.0.0.1:9091) and that the Pushgateway is running",
        ) from None
