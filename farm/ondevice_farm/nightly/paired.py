"""The nightly runs a changed job's baseline beside it: its last good artifact, interleaved.

History cannot tell a 5-10% change from a night's drift on a noisy unit (docs/benchmarks.md), so
a job whose artifact changed since its last success (by sha256) runs that last good artifact
(kept in the artifact store) as A and tonight's as B, in rounds on the same unit
(agents/ondevice_farm_agents/paired.py), and is judged by the paired test
(farm/ondevice_farm/analysis/paired.py). A job whose artifact did not change is judged against its history as
before. The paired jobs of one night are a family: each test spends alpha / m (Bonferroni), m the
number of tests: one per changed fixed graph, two per changed generation job (TTFT and decode
tokens/s, judged each by its own paired test: farm/ondevice_farm/nightly/generation_verdict.py).
"""

from __future__ import annotations

import dataclasses
import functools
import secrets
from pathlib import Path
from typing import Any

from ondevice_farm.analysis.paired import PairedPolicy, decided
from ondevice_farm.analysis.paired_generation import GENERATION_METRICS
from ondevice_farm.analysis.regression import RegressionPolicy
from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.io_names import load_io_names, sidecar_path
from ondevice_farm.controller.client import FleetClient
from ondevice_farm.controller.pipeline import PlannedModel
from ondevice_farm.nightly.compare import Key, Series, job_key
from ondevice_farm_agents.base import PairedPlan


def stored_artifact(store: ArtifactStore, sha256: str) -> Path | None:
    """The artifact kept under `sha256` (its one entry beside any I/O-name sidecar), if still there."""
    folder = store.path_for(sha256, "x").parent
    if not folder.is_dir():
        return None
    entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    sidecars = {sidecar_path(p) for p in entries}
    artifacts = [p for p in entries if p not in sidecars]
    return artifacts[0] if len(artifacts) == 1 else None


def attach_baselines(
    planned: list[PlannedModel],
    series: dict[Key, Series],
    store: ArtifactStore,
    client: FleetClient,
    policy: RegressionPolicy,
) -> int:
    """Give every changed job its paired plan (in place); how many jobs got one."""
    changed: list[tuple[PlannedModel, int, Path, dict[str, Any], str]] = []
    for model in planned:
        for index, spec in enumerate(model.specs):
            base = model.bases[spec.job_id][0]
            runs = series.get(job_key(base))
            if not runs:
                continue
            last_run, last_job = runs[-1]
            old_sha = last_job.get("artifact_sha256")
            if not old_sha or old_sha == spec.request.artifact_sha256:
                continue
            path = stored_artifact(store, old_sha)
            if path is not None:
                changed.append((model, index, path, base, last_run))
    # one test per changed fixed graph, two per changed generation job (TTFT and decode rate)
    tests = sum(len(GENERATION_METRICS) if m.specs[i].request.generation else 1 for m, i, *_ in changed)
    family = PairedPolicy(policy.alpha, policy.min_effect).for_family(tests)
    for model, index, path, base, last_run in changed:
        spec = model.specs[index]
        old_sha = path.parent.name
        baseline = dataclasses.replace(
            spec.request, artifact=path, artifact_sha256=old_sha, io_names=load_io_names(path), paired=None
        )
        plan = PairedPlan(
            baseline=baseline,
            max_rounds=policy.paired_max_rounds,
            budget_s=policy.paired_budget_s,
            seed=secrets.randbelow(2**31),
            decided=functools.partial(decided, policy=family),
            min_rounds=family.min_rounds,
        )
        request = dataclasses.replace(
            spec.request,
            paired=plan,
            timeout_s=spec.request.timeout_s,
        )
        model.specs[index] = dataclasses.replace(
            spec, request=request, baseline_blob=client.ship(path, old_sha)
        )
        base["paired_baseline"] = {
            "artifact_sha256": old_sha,
            "run_id": last_run,
            "alpha": family.alpha,
            "min_effect": family.min_effect,
            "max_rounds": plan.max_rounds,
            "budget_s": plan.budget_s,
            **({"metrics": list(GENERATION_METRICS)} if spec.request.generation is not None else {}),
        }
    return len(changed)
