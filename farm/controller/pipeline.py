"""One submission end to end: ingest, compile, reference, schedule, run, analyse, store.

Everything that can be wrong with the input is checked before the store is touched, so a
bad command line leaves no trace; after that, each job lands in the store whole or as a
failure carrying its error.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnx

from agents.base import AgentSettings, RunRequest
from farm.analysis.job import failed_document, job_document
from farm.analysis.numeric import Tolerance, default_tolerance
from farm.artifacts import ArtifactStore
from farm.compile import compile_for_target
from farm.compile.report import CompiledArtifact
from farm.config import DEFAULT_SEED, DEFAULT_TIMED_RUNS, DEFAULT_WARMUP_RUNS, FarmHome
from farm.controller.cluster import ClusterConfig, ray_cluster
from farm.controller.dispatch import Job, run_jobs
from farm.controller.selection import DeviceSelector, check_targets, parse_devices, targets_for
from farm.errors import FarmError, UsageError
from farm.inputs import load_npz_inputs, resolve_shapes, seeded_inputs
from farm.model import ModelInfo, inspect_model
from farm.profiles import DeviceProfile
from farm.reference import reference_outputs
from farm.store import ResultsStore, new_run_id
from farm.targets import Target


class Progress(Protocol):
    def stage(self, text: str) -> None: ...
    def jobs_started(self, total: int) -> None: ...
    def job_finished(self, job: dict[str, Any]) -> None: ...


class SilentProgress:
    def stage(self, text: str) -> None:
        pass

    def jobs_started(self, total: int) -> None:
        pass

    def job_finished(self, job: dict[str, Any]) -> None:
        pass


@dataclass(frozen=True)
class SubmitRequest:
    model_path: Path
    devices: str
    targets: list[Target] | None = None
    runs: int = DEFAULT_TIMED_RUNS
    warmup: int = DEFAULT_WARMUP_RUNS
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    inputs_npz: Path | None = None
    seed: int = DEFAULT_SEED
    tolerance: Tolerance | None = None
    intra_op_threads: int | None = None
    profile_ops: bool = True
    coreml_precision: str = "fp16"


@dataclass
class Prepared:
    """A checked submission: what to run, with what, against which reference."""

    info: ModelInfo
    selectors: list[DeviceSelector]
    plan: list[tuple[DeviceSelector, Target]]
    shapes: dict[str, tuple[int, ...]]
    inputs: dict[str, np.ndarray]


def prepare(request: SubmitRequest, profiles: dict[str, DeviceProfile]) -> Prepared:
    if request.runs < 1:
        raise UsageError("--runs must be at least 1")
    if request.warmup < 0:
        raise UsageError("--warmup cannot be negative")
    selectors = parse_devices(request.devices, profiles)
    check_targets(selectors, profiles, request.targets)
    info = inspect_model(request.model_path)
    shapes = resolve_shapes(info, request.shapes)
    inputs = seeded_inputs(info, shapes, request.seed, onnx.load(str(info.path), load_external_data=False))
    if request.inputs_npz is not None:
        inputs = load_npz_inputs(request.inputs_npz, info, inputs)
    plan = [(s, t) for s in selectors for t in targets_for(profiles[s.profile], request.targets)]
    return Prepared(info, selectors, plan, shapes, inputs)


def run_document(run_id: str, request: SubmitRequest, prepared: Prepared) -> dict[str, Any]:
    info = prepared.info
    return {
        "run_id": run_id,
        "kind": "submit",
        "model": {
            "name": info.name, "sha256": info.sha256, "path": str(info.path), "opset": info.opset,
            "nodes": info.node_count,
            "inputs": [{"name": n, "shape": list(s), "dtype": str(prepared.inputs[n].dtype)}
                       for n, s in prepared.shapes.items()],
            "outputs": [{"name": o.name, "dtype": o.dtype} for o in info.outputs],
        },
        "settings": {"runs": request.runs, "warmup": request.warmup, "seed": request.seed,
                     "devices": request.devices,
                     "targets": None if request.targets is None else [t.name for t in request.targets]},
    }


def _compile_all(request: SubmitRequest, prepared: Prepared, home: FarmHome,
                 progress: Progress) -> dict[Target, CompiledArtifact | FarmError]:
    store = ArtifactStore(home.artifacts)
    compiled: dict[Target, CompiledArtifact | FarmError] = {}
    for target in sorted({t for _, t in prepared.plan}):
        progress.stage(f"compiling for {target}")
        try:
            compiled[target] = compile_for_target(
                prepared.info.path, target, store, input_shapes=prepared.shapes,
                coreml_precision=request.coreml_precision,
            )
        except FarmError as exc:
            compiled[target] = exc
    return compiled


def submit(
    request: SubmitRequest,
    *,
    home: FarmHome,
    profiles: dict[str, DeviceProfile],
    settings: AgentSettings,
    cluster: ClusterConfig,
    progress: Progress | None = None,
) -> dict[str, Any]:
    progress = progress or SilentProgress()
    prepared = prepare(request, profiles)
    home.ensure()
    run_id = new_run_id()
    document = run_document(run_id, request, prepared)
    with ray_cluster(cluster):
        from farm.controller.dispatch import attach_units

        progress.stage("finding devices")
        units = attach_units(prepared.selectors, profiles, settings)
        compiled = _compile_all(request, prepared, home, progress)
        progress.stage("computing the host reference")
        reference = reference_outputs(prepared.info.path, prepared.info.sha256, prepared.inputs, home.references)
        with ResultsStore(home.store_path) as store:
            store.start_run(run_id, "submit", document)
            jobs_out: list[dict[str, Any]] = []
            pending: list[Job] = []
            for selector, target in prepared.plan:
                base = {
                    "job_id": f"{run_id}-{secrets.token_hex(3)}", "run_id": run_id,
                    "model": {"name": prepared.info.name, "sha256": prepared.info.sha256},
                    "device": selector.profile, "unit": selector.serial, "target": target.name,
                }
                artifact = compiled[target]
                if isinstance(artifact, FarmError):
                    failed = failed_document({**base, "finished_at": time.time()}, str(artifact),
                                             type(artifact).__name__)
                    store.add_job(run_id, failed)
                    jobs_out.append(failed)
                    continue
                pending.append(Job(base=base, selector=selector, artifact=artifact, request=RunRequest(
                    artifact=artifact.path, artifact_sha256=artifact.sha256, target=target,
                    inputs=prepared.inputs, warmup=request.warmup, runs=request.runs,
                    profile_ops=request.profile_ops, intra_op_threads=request.intra_op_threads,
                )))
            progress.jobs_started(len(pending) + len(jobs_out))
            for job in jobs_out:
                progress.job_finished(job)
            for job, outcome in run_jobs(pending, units):
                base = {**job.base, **outcome.timing}
                if outcome.error is not None:
                    doc = failed_document(base, str(outcome.error), type(outcome.error).__name__)
                else:
                    assert outcome.run is not None
                    tolerance = request.tolerance or default_tolerance(job.artifact.target)
                    doc = job_document(base=base, target=job.artifact.target, artifact=job.artifact,
                                       run=outcome.run, reference=reference, tolerance=tolerance)
                store.add_job(run_id, doc)
                jobs_out.append(doc)
                progress.job_finished(doc)
            failed_jobs = sum(1 for j in jobs_out if j["status"] != "ok")
            status = "complete" if failed_jobs == 0 else ("failed" if failed_jobs == len(jobs_out) else "partial")
            store.finish_run(run_id, status)
    document.update(status=status, jobs=jobs_out)
    return document
