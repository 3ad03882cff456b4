"""One submission end to end: ingest, compile, reference, schedule, run, analyse, store.

Everything that can be wrong with the input is checked before the store is touched, so a
bad command line leaves no trace; after that, each job lands in the store whole or as a
failure carrying its error. The fleet writes it, as it finishes, from the document context each
job carries (`JobContext`); this submitter hears a summary of it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ondevice_farm.analysis.job import failed_document
from ondevice_farm.analysis.tolerance import Tolerance
from ondevice_farm.artifacts import ArtifactStore, tree_size_bytes
from ondevice_farm.compile import CompileCache, compile_for_target
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.config import (
    FarmHome,
)
from ondevice_farm.controller.client import FleetClient, fleet_client
from ondevice_farm.controller.cluster import ClusterConfig
from ondevice_farm.controller.fleet_events import JobEvent
from ondevice_farm.controller.job_context import JobContext, JobEnd, ModelContext, RunWriting
from ondevice_farm.controller.job_summary import JobSummary
from ondevice_farm.controller.job_writer import document_for
from ondevice_farm.controller.node_agent import default_platforms
from ondevice_farm.controller.queue import JobSpec
from ondevice_farm.controller.recording import RunRecorder, recorded_run
from ondevice_farm.controller.results import run_store
from ondevice_farm.controller.selection import needs_units
from ondevice_farm.controller.submission import job_tolerance, prepare, run_document, with_home_caches
from ondevice_farm.controller.submit_request import Prepared, SubmitRequest
from ondevice_farm.errors import FarmError, ModelError
from ondevice_farm.gc.leases import LeaseBook
from ondevice_farm.inputs import UnpinnedDims, unpinned_dims
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.progress import Progress, SilentProgress
from ondevice_farm.reference import reference_model_entry, reference_outputs
from ondevice_farm.store import StoreLocation, new_job_id, new_run_id
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import (
    DEFAULT_JOB_TIMEOUT_S,
    AgentSettings,
    RunRequest,
)

if TYPE_CHECKING:
    from ondevice_farm.torch_source.ingest import TorchSource


def compile_all(
    request: SubmitRequest, prepared: Prepared, home: FarmHome, progress: Progress
) -> dict[Target, CompiledArtifact | FarmError]:
    store = ArtifactStore(home.artifacts)
    if prepared.generation is not None:  # an ONNX Runtime GenAI folder is its own artifact
        from ondevice_farm.controller.generation import folder_artifact

        size_mb = tree_size_bytes(prepared.info.path) / 1e6
        progress.stage(f"storing the model folder {prepared.info.name} ({size_mb:.1f} MB)")
        return {t: folder_artifact(prepared, t, store) for t in sorted({t for _, t in prepared.plan})}
    pytorch = prepared.torch
    if pytorch is None or pytorch.export is not None:
        # the source model too, under its own hash: `farm report` finds it there after the user's
        # copy has moved, for op alignment and the pre-flight comparison (both read ONNX)
        store.put(prepared.info.path, "model.onnx")
    compiled: dict[Target, CompiledArtifact | FarmError] = {}
    # a refusal names the dynamic dims the farm sized (a checkpoint's shapes are its examples')
    unpinned = None if pytorch is not None else unpinned_dims(prepared.info, request.shapes, prepared.shapes)
    for target in sorted({t for _, t in prepared.plan}):
        progress.stage(f"compiling for {target}")
        try:
            if pytorch is not None:  # a target built from an ONNX export the checkpoint lacks
                pytorch.check_target(target)
            compiled[target] = compile_for_target(
                prepared.info.path,
                target,
                store,
                input_shapes=prepared.shapes,
                coreml_precision=request.coreml_precision,
                source=pytorch.checkpoint if pytorch is not None else None,
                coreml_quantization=request.coreml_quantization,
                cache=CompileCache(home.compiled, prepared.info.sha256),
                coreml_fixed_inputs=prepared.fixed_inputs or None,
                unpinned=unpinned,
            )
        except FarmError as exc:
            compiled[target] = exc
    return compiled


def run_request(request: SubmitRequest, prepared: Prepared, artifact: CompiledArtifact) -> RunRequest:
    """What a unit is asked to do for one compiled artifact of a submission."""
    return RunRequest(
        artifact=artifact.path,
        artifact_sha256=artifact.sha256,
        target=artifact.target,
        inputs=job_inputs(prepared, artifact),
        warmup=request.warmup,
        runs=request.runs,
        repeats=request.repeats,
        profile_ops=request.profile_ops,
        intra_op_threads=request.intra_op_threads,
        sustained_s=request.sustained_s,
        sustained_window_s=request.sustained_window_s,
        # the job's deadline grows with the sustained phase it asks for
        timeout_s=DEFAULT_JOB_TIMEOUT_S + request.sustained_s,
        io_names=artifact.io_names,
        generation=prepared.generation,
    )


def job_inputs(prepared: Prepared, artifact: CompiledArtifact) -> dict[str, np.ndarray]:
    """The inputs an artifact takes: a `--fix` input the CoreML lowering made a constant is no
    input of its ML Program (the iOS runner refuses a job naming a feature the model lacks);
    ONNX Runtime artifacts take every input, the pinned ones at their pinned value."""
    if not prepared.fixed_inputs or artifact.io_names is None:
        return prepared.inputs
    taken = {feature.onnx_name for feature in artifact.io_names.inputs}
    return {n: a for n, a in prepared.inputs.items() if n in taken or n not in prepared.fixed_inputs}


@dataclass
class PlannedModel:
    """One model's jobs, ready for the fleet: compiled, with its reference outputs."""

    request: SubmitRequest
    prepared: Prepared
    reference: dict[str, np.ndarray]
    specs: list[JobSpec] = field(default_factory=list)
    #: job id -> what its document needs besides the unit's result (the fleet builds it)
    contexts: dict[str, JobContext] = field(default_factory=dict)
    #: jobs that failed before reaching a unit (their target did not compile)
    failed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def bases(self) -> dict[str, tuple[dict[str, Any], CompiledArtifact]]:
        """job id -> (the job document's base fields, its compiled artifact)."""
        return {job_id: (c.base, c.artifact) for job_id, c in self.contexts.items()}


def plan_model(
    request: SubmitRequest,
    prepared: Prepared,
    run_id: str,
    *,
    home: FarmHome,
    client: FleetClient,
    progress: Progress,
    expected_s: Callable[[dict[str, Any]], float | None] | None = None,
) -> PlannedModel:
    compiled = compile_all(request, prepared, home, progress)
    unpinned: UnpinnedDims | None = None
    if prepared.generation is not None:
        from ondevice_farm.controller.generation import folder_reference

        progress.stage(f"generating the host reference of {prepared.info.name} greedily on the CPU")
        reference = folder_reference(prepared, home.references)
    elif prepared.torch is not None:
        # the checkpoint itself is the reference: the ONNX export's own error then shows in every job
        progress.stage(f"computing the host reference of {prepared.info.name} with PyTorch eager")
        reference = prepared.torch.eager
    else:
        source = prepared.reference_source
        progress.stage(f"computing the host reference of {prepared.info.name} with {source.path.name}")
        # the sizes the inputs ran at, named where the reference run or a job fails
        ran_at = {name: tuple(array.shape) for name, array in prepared.inputs.items()}
        unpinned = unpinned_dims(prepared.info, request.shapes, ran_at)
        try:
            computed = reference_outputs(source.path, source.sha256, prepared.inputs, home.references)
        except ModelError as exc:
            if unpinned is None:
                raise
            raise unpinned.explained(exc) from None
        # a --reference model may give more outputs than the model: only the model's are compared
        reference = {o.name: computed[o.name] for o in prepared.info.outputs if o.name in computed}
    planned = PlannedModel(request, prepared, reference)
    # one per model, shared by its jobs' contexts: it crosses Ray once per submission
    model = ModelContext(
        reference=reference,
        reference_model=(
            prepared.torch.reference_entry()
            if prepared.torch is not None
            else reference_model_entry(prepared.reference_source, prepared.reference_info is not None)
        ),
        shape_note=unpinned.note() if unpinned is not None else "",
    )
    tolerances: dict[str, Tolerance] = {}
    shipped: dict[str, Any] = {}
    # one of each per model and artifact, shared by its jobs (a night's plan is 30,000 jobs): what
    # a unit is asked to do is frozen, and nothing writes into a base's model
    requests: dict[str, RunRequest] = {}
    model_names = {"name": prepared.info.name, "sha256": prepared.info.sha256}
    for selector, target in prepared.plan:
        job_id = new_job_id(run_id)
        base: dict[str, Any] = {
            "job_id": job_id,
            "run_id": run_id,
            "model": model_names,
            "device": selector.profile,
            "unit": selector.serial,
            "target": target.name,
            "requested": str(selector),
        }
        artifact = compiled[target]
        if isinstance(artifact, FarmError):
            planned.failed.append(
                failed_document({**base, "finished_at": time.time()}, str(artifact), type(artifact).__name__)
            )
            continue
        if artifact.sha256 not in shipped:
            if artifact.path.is_dir() and not client.embedded:  # a folder may be gigabytes: say so
                size_mb = tree_size_bytes(artifact.path) / 1e6
                progress.stage(f"shipping {artifact.path.name} ({size_mb:.1f} MB) to the object store")
            shipped[artifact.sha256] = client.ship(artifact.path, artifact.sha256)
        if artifact.sha256 not in tolerances:
            tolerances[artifact.sha256] = job_tolerance(request, artifact)
            requests[artifact.sha256] = run_request(request, prepared, artifact)
        planned.contexts[job_id] = JobContext(base, artifact, tolerances[artifact.sha256], model)
        planned.specs.append(
            JobSpec(
                job_id=job_id,
                selector=selector,
                request=requests[artifact.sha256],
                artifact_blob=shipped[artifact.sha256],
                expected_s=expected_s(base) if expected_s is not None else None,
                max_attempts=request.max_attempts,
                placement_deadline_s=request.placement_deadline_s,
                movable=request.units_interchangeable and selector.serial is not None,
            )
        )
    return planned


def run_planned(
    planned: list[PlannedModel],
    client: FleetClient,
    recorder: RunRecorder,
    progress: Progress,
    *,
    owned: bool = False,
    detach: bool = False,
) -> None:
    """Hand every job to the fleet as one submission, with what each job's document needs: the
    fleet stores each job as soon as it is complete, and this hears its summary. `owned`: the
    run is the controller's, run to its end if this stops following; `detach`: handed over and
    not followed at all (the recorder's status stays "running")."""
    early = [doc for p in planned for doc in p.failed]
    contexts = {job_id: c for p in planned for job_id, c in p.contexts.items()}
    progress.jobs_started(len(contexts) + len(early))
    for doc in early:
        progress.job_finished(recorder.add_job(doc).to_document())
    specs = [s for p in planned for s in p.specs]
    writing = RunWriting(recorder.run_id, contexts)
    if detach and specs:
        client.hand_over(specs, recorder.run_id, writing)
        recorder.handed_over = recorder.detached = True
        return

    def handed_over() -> None:
        recorder.handed_over = owned

    def on_event(event: JobEvent) -> None:
        if event.kind in ("waiting", "retrying"):
            base = contexts[event.job_id].base
            progress.stage(f"{base['requested']} {base['target']}: {event.message}")

    events = client.run(
        specs, on_event, run_id=recorder.run_id, writing=writing, owned=owned, on_submitted=handed_over
    )
    for event in events:
        if event.summary is not None:
            summary = recorder.stored(event.summary)
        else:
            summary = _written_here(event, contexts[event.job_id], recorder)
        progress.job_finished(summary.to_document())


def _written_here(event: JobEvent, context: JobContext, recorder: RunRecorder) -> JobSummary:
    """A final event with the unit's result instead of a summary: a fleet that does not write
    (one in this process, with no Ray: tests' stand-ins). The document is built and written here,
    one at a time, and not kept."""
    end = JobEnd(
        queued_at=event.queued_at,
        started_at=event.started_at,
        finished_at=event.finished_at,
        attempts=event.attempts,
        unit=event.unit,
        run=event.run if event.kind == "done" else None,
        error=event.error,
        message=event.message,
    )
    return recorder.add_job(document_for(context, end))


def planned_artifacts(planned: list[PlannedModel]) -> set[str]:
    """The sha256 of every artifact the planned jobs use: source models and compiled artifacts."""
    compiled = {artifact.sha256 for p in planned for _, artifact in p.bases.values()}
    return {p.prepared.info.sha256 for p in planned} | compiled


def check_requests(
    requests: list[SubmitRequest], profiles: dict[str, DeviceProfile], settings: AgentSettings
) -> tuple[list[Prepared | None], tuple[str, ...]]:
    """Each request checked before any cluster starts (None for all of them when one asks for
    `--devices all`, which needs the attached units first), and the platforms an embedded fleet
    must discover on this host."""
    if any(needs_units(r.devices) for r in requests):
        return [None] * len(requests), default_platforms(simulated="simulated_units" in settings.extra)
    checked = [prepare(r, profiles) for r in requests]
    platforms = {profiles[s.profile].platform for c in checked for s in c.selectors}
    return list(checked), tuple(sorted(platforms))


def prepare_on(
    client: FleetClient,
    requests: list[SubmitRequest],
    checked: list[Prepared | None],
    profiles: dict[str, DeviceProfile],
) -> list[Prepared]:
    """The requests `check_requests` could not check alone, checked against the units attached;
    embedded, a selector with no unit attached is an error now (none will appear later)."""
    attached = client.attached_units() if None in checked else None
    prepared = [c or prepare(r, profiles, attached=attached) for r, c in zip(requests, checked, strict=True)]
    if client.embedded:
        for p in prepared:
            client.check_attached(p.selectors)
    return prepared


def submit(
    request: SubmitRequest,
    *,
    home: FarmHome,
    profiles: dict[str, DeviceProfile],
    settings: AgentSettings,
    cluster: ClusterConfig,
    progress: Progress | None = None,
    store: StoreLocation | None = None,
) -> dict[str, Any]:
    """Embedded, the results go to `store` (default: the farm directory's); with an address, to
    the controller's store, which `farm serve` named."""
    progress = progress or SilentProgress()
    request = with_home_caches(request, home)
    checked, platforms = check_requests([request], profiles, settings)
    progress.stage("finding devices")
    with fleet_client(cluster, settings, profiles, platforms) as client:
        return submit_on(
            client, request, checked[0], home=home, profiles=profiles, progress=progress, store=store
        )


def submit_on(
    client: FleetClient,
    request: SubmitRequest,
    checked: Prepared | None,
    *,
    home: FarmHome,
    profiles: dict[str, DeviceProfile],
    progress: Progress,
    store: StoreLocation | None = None,
    compile_slot: AbstractContextManager[Any] | None = None,
) -> dict[str, Any]:
    """One submission on a fleet already reached: `submit`'s, or `farm serve`'s own for a
    submission that came over its HTTP API (`checked`: `check_requests`' result, if run;
    `compile_slot`: held while it compiles and computes references, the CPU work that a
    controller shares among its submitters, api/admission.py)."""
    [prepared] = prepare_on(client, [request], [checked], profiles)
    home.ensure()
    run_id = new_run_id()
    document = run_document(run_id, request, prepared)
    # `farm gc` leaves what the run uses alone until its jobs are stored (farm/ondevice_farm/gc/leases.py)
    with LeaseBook(home.root).lease() as lease:
        with compile_slot or contextlib.nullcontext():
            with lease.placing():
                planned = plan_model(request, prepared, run_id, home=home, client=client, progress=progress)
                lease.hold_artifacts(home.artifacts, planned_artifacts([planned]))
            if prepared.torch is not None and prepared.torch.export is not None:
                progress.stage("comparing the ONNX export and both CoreML routes against PyTorch eager")
                study = _source_study(prepared.torch, home, request.coreml_precision)
                document["model"]["source"].update(study)
            elif prepared.torch is not None:  # no ONNX: neither its check on ORT nor the ONNX route
                document["model"]["source"]["routes"] = {
                    "error": "the ONNX export refused the checkpoint: no ONNX route"
                }
        # in the run row before its first job starts: what a follower counts stored jobs against
        document["planned_jobs"] = len(planned.specs) + len(planned.failed)
        with run_store(client.embedded, client.fleet, store or home.store_path) as results:
            with recorded_run(results, run_id, "submit", document) as rec:
                run_planned([planned], client, rec, progress)
            # one model's jobs (devices x targets), read back from the store for the report
            document.update(status=rec.status, jobs=results.jobs(run_id))
    return document


def _source_study(source: TorchSource, home: FarmHome, precision: str) -> dict[str, Any]:
    """The ONNX export against eager (measured) and both CoreML routes (predicted), for the report."""
    from ondevice_farm.torch_source.routes import export_check, route_study

    onnx_outputs = reference_outputs(source.info.path, source.info.sha256, source.inputs, home.references)
    study: dict[str, Any] = {"export_check": export_check(source, onnx_outputs)}
    try:
        study["routes"] = route_study(source, precision)
    except FarmError as exc:  # the ONNX route cannot lower the export
        study["routes"] = {"error": exc.message}
    except ImportError as exc:  # no coremltools: the ORT targets run all the same
        study["routes"] = {
            "error": f"CoreML routes need coremltools ({exc}); pip install 'ondevice-farm[coreml]'"
        }
    return study
