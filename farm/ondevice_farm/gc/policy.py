"""Which stored runs `farm gc` keeps, and why: the retention policy over the results store.

A run is kept when any of these holds (the reasons, as `farm gc --dry-run` names them):

- `running`: it has not finished;
- `recent`: it started less than `keep_days` ago;
- `series`: it holds one of the newest `keep_runs` successful jobs of a series, or the newest job
  of a series whatever its status. A series is one job of one kind and suite: (kind, suite, model,
  device or unit asked for, target). The nightly's history of a job is its last 10 successes
  (`farm/ondevice_farm/nightly/run.py`, HISTORY_RUNS), its baseline the newest of them, and that baseline's
  artifact what a changed job runs beside it (`farm/ondevice_farm/nightly/paired.py`): keeping the newest
  `keep_runs` >= 1 successes keeps every baseline the nightly can choose.
- `suite`: it is its suite's newest finished run (the nightly's "previous run").

A kept run keeps the artifacts it names: its source models, its jobs' compiled artifacts and
their paired baselines' artifacts, so `farm report`, `farm compare run:ID` and the nightly find them.
Runs kept by `recent` alone are the ones `--max-bytes` may still remove, oldest first.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.errors import UsageError
from ondevice_farm.store import JobSummary, RunRow

#: successful runs kept per series: the nightly's history of a job (HISTORY_RUNS in
#: farm/ondevice_farm/nightly/run.py)
DEFAULT_KEEP_RUNS = 10
#: runs younger than this, and cache entries used more recently, are kept
DEFAULT_KEEP_DAYS = 30.0
#: nothing used more recently than this is removed, even to get under --max-bytes: a file a
#: farm without leases (an older one, `farm compare`) found a moment ago
DEFAULT_MIN_IDLE_S = 3600.0
SECONDS_PER_DAY = 86400.0

#: what `farm gc` reads of each job's document
JOB_PATHS = ("$.requested", "$.artifact_sha256", "$.paired_baseline.artifact_sha256")
#: reasons that `--max-bytes` does not override
FIRM_REASONS = ("running", "series", "suite")


@dataclass(frozen=True)
class RetentionPolicy:
    keep_runs: int = DEFAULT_KEEP_RUNS
    keep_days: float = DEFAULT_KEEP_DAYS
    #: the caches' total on disk to stay under (None: no limit)
    max_bytes: int | None = None
    min_idle_s: float = DEFAULT_MIN_IDLE_S

    def check(self, flag_prefix: str = "") -> RetentionPolicy:
        """`flag_prefix`: how the CLI's flags are spelt (`gc-` for `farm serve --gc-keep-runs`)."""
        if self.keep_runs < 1:
            raise UsageError(
                f"--{flag_prefix}keep-runs must be at least 1: the nightly's baseline is the newest "
                "success of each job"
            )
        if self.keep_days < 0:
            raise UsageError(f"--{flag_prefix}keep-days cannot be negative")
        if self.max_bytes is not None and self.max_bytes < 0:
            raise UsageError(f"--{flag_prefix}max-bytes cannot be negative")
        return self

    @property
    def keep_s(self) -> float:
        return self.keep_days * SECONDS_PER_DAY


@dataclass
class RunVerdict:
    run_id: str
    created_at: float
    kind: str
    suite: str | None
    #: why it is kept (empty: it goes)
    reasons: set[str] = field(default_factory=set)
    #: the sha256 of every artifact it names
    artifacts: set[str] = field(default_factory=set)
    #: its run and job documents' length in the store (what deleting its rows frees, estimated)
    document_bytes: int = 0

    @property
    def kept(self) -> bool:
        return bool(self.reasons)

    @property
    def firm(self) -> bool:
        """Kept for a reason `--max-bytes` does not override."""
        return any(r in FIRM_REASONS for r in self.reasons)


def _run_artifacts(document: dict[str, Any]) -> set[str]:
    models = [document.get("model") or {}, *(document.get("models") or [])]
    return {str(m["sha256"]) for m in models if isinstance(m, dict) and m.get("sha256")}


def weigh_runs(
    runs: list[RunRow], jobs: list[JobSummary], policy: RetentionPolicy, now_s: float
) -> dict[str, RunVerdict]:
    """run id -> its verdict under `policy` at `now_s`; `jobs` were read with `JOB_PATHS`."""
    verdicts = {
        r.run_id: RunVerdict(
            r.run_id,
            r.created_at,
            r.kind,
            r.suite,
            artifacts=_run_artifacts(r.document),
            document_bytes=len(json.dumps(r.document)),
        )
        for r in runs
    }
    newest_finished: dict[str, RunRow] = {}
    for run in runs:
        verdict = verdicts[run.run_id]
        if run.status == "running":
            verdict.reasons.add("running")
        if now_s - run.created_at < policy.keep_s:
            verdict.reasons.add("recent")
        if run.suite and run.status != "running":
            best = newest_finished.get(run.suite)
            if best is None or (run.created_at, run.run_id) > (best.created_at, best.run_id):
                newest_finished[run.suite] = run
    for run in newest_finished.values():
        verdicts[run.run_id].reasons.add("suite")
    series: dict[tuple[str, ...], list[tuple[float, str, str]]] = defaultdict(list)
    for job in jobs:
        owner = verdicts.get(job.run_id)
        if owner is None:  # a job without its run: the schema's foreign key forbids it
            continue
        requested, artifact, baseline = job.values
        verdict = owner
        verdict.artifacts.update(str(s) for s in (job.model_sha256, artifact, baseline) if s)
        verdict.document_bytes += job.document_bytes
        key = (verdict.kind, verdict.suite or "", job.model_name, str(requested or job.device), job.target)
        series[key].append((verdict.created_at, job.run_id, job.status))
    for entries in series.values():
        entries.sort(reverse=True)  # newest first
        verdicts[entries[0][1]].reasons.add("series")
        for _, run_id, _ in [e for e in entries if e[2] == "ok"][: policy.keep_runs]:
            verdicts[run_id].reasons.add("series")
    return verdicts
