"""`farm compare BASE CANDIDATE`: A and B interleaved on the same units, judged round by round.

Each (unit, target) pair is one paired job (`RunRequest.paired`, agents/ondevice_farm_agents/paired.py): the
unit measures B's own run, then rounds of A and B in fresh sessions in a random order, until the
sequential test (farm/ondevice_farm/analysis/paired.py) decides or the pair's rounds or device time run out.
Both models run on the same inputs (A's, seeded or `--inputs`), with the same session options and
noise controls; two models whose inputs differ are refused before anything is compiled. Two
ONNX Runtime GenAI folders (`generate`) are compared on TTFT and decode tokens/s instead
(farm/ondevice_farm/controller/compare_generation.py).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ondevice_farm.analysis.job import paired_document
from ondevice_farm.analysis.paired import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    DEFAULT_MIN_ROUNDS,
    METHOD,
    PairedPolicy,
    decided,
    judge,
    rounds_to_decide,
    stored_pairs,
)
from ondevice_farm.compile.report import CompiledArtifact
from ondevice_farm.config import DEFAULT_SEED, DEFAULT_TIMED_RUNS, DEFAULT_WARMUP_RUNS, FarmHome
from ondevice_farm.controller.client import FleetClient, fleet_client
from ondevice_farm.controller.cluster import ClusterConfig
from ondevice_farm.controller.compare_sources import ModelSource, check_same_work, resolve_source
from ondevice_farm.controller.fleet import JobEvent
from ondevice_farm.controller.pipeline import check_requests, compile_all, prepare_on, run_request
from ondevice_farm.controller.queue import JobSpec
from ondevice_farm.controller.selection import DeviceSelector
from ondevice_farm.controller.submission import with_home_caches
from ondevice_farm.controller.submit_request import Prepared, SubmitRequest
from ondevice_farm.errors import FarmError, UsageError
from ondevice_farm.gc.leases import LeaseBook
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.progress import Progress, SilentProgress
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, PairedPlan, RunRequest

if TYPE_CHECKING:
    from ondevice_farm.generate.spec import GenerateSpec

#: intra-op threads of a compare's sessions unless told: one thread has no scheduling between
#: workers to vary from session to session (docs/benchmarks.md, "Noise controls")
DEFAULT_COMPARE_THREADS = 1
DEFAULT_MAX_ROUNDS = 200
#: device time one pair may spend on its rounds
DEFAULT_BUDGET_S = 600.0
#: `cpu_affinity` value: pin to the profile's performance cores, or the host's last CPUs
AUTO_AFFINITY = "auto"


@dataclass(frozen=True)
class CompareRequest:
    baseline: str
    candidate: str
    devices: str = "host-cpu"
    targets: list[Target] | None = None
    runs: int = DEFAULT_TIMED_RUNS
    warmup: int = DEFAULT_WARMUP_RUNS
    shapes: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    inputs_npz: Path | None = None
    seed: int = DEFAULT_SEED
    intra_op_threads: int | None = DEFAULT_COMPARE_THREADS
    #: "auto", "none", or CPU numbers
    cpu_affinity: str | tuple[int, ...] = AUTO_AFFINITY
    allow_spinning: bool | None = None
    alpha: float = DEFAULT_ALPHA
    min_effect: float = DEFAULT_MIN_EFFECT
    max_rounds: int = DEFAULT_MAX_ROUNDS
    budget_s: float = DEFAULT_BUDGET_S
    #: the seed of the rounds' orders (None: drawn, and recorded)
    order_seed: int | None = None
    #: two ONNX Runtime GenAI folders, judged on TTFT and decode tokens/s (docs/compare.md)
    generate: GenerateSpec | None = None

    def check(self) -> None:
        if self.max_rounds < DEFAULT_MIN_ROUNDS:
            raise UsageError(
                f"--max-rounds must be at least {DEFAULT_MIN_ROUNDS} (the test's first look is after "
                f"round {DEFAULT_MIN_ROUNDS})"
            )
        if self.budget_s <= 0:
            raise UsageError("--budget must be positive")
        if not 0.0 < self.alpha < 0.5:
            raise UsageError("--alpha must be between 0 and 0.5")
        if not 0.0 <= self.min_effect < 1.0:
            raise UsageError("--min-effect must be a fraction in [0, 1), e.g. 0.03 for 3%")
        if self.runs < 1 or self.warmup < 0:
            raise UsageError("--runs must be at least 1 and --warmup not negative")
        if self.generate is not None:
            from ondevice_farm.controller.compare_generation import check_generation_sources

            check_generation_sources(self.generate, self.allow_spinning, [self.baseline, self.candidate])

    def family(self, pairs: int) -> PairedPolicy:
        """Each test's share of alpha: Bonferroni over the pairs (and a generation pair's two metrics)."""
        policy = PairedPolicy(self.alpha, self.min_effect)
        if self.generate is None:
            return policy.for_family(pairs)
        from ondevice_farm.analysis.paired_generation import generation_family

        return generation_family(policy, pairs)


def resolve_affinity(
    asked: str | tuple[int, ...], profile: DeviceProfile, threads: int | None
) -> tuple[int, ...] | None:
    """`auto`: the profile's performance cores (as many as the threads), or on the host the last
    CPUs, leaving CPU 0 to the farm's own processes; `none`: not pinned."""
    if isinstance(asked, tuple):
        return asked
    if asked == "none":
        return None
    want = max(threads or 1, 1)
    performance = tuple(getattr(profile, "performance_cores", ()) or ())
    if performance:
        return performance[-want:] if threads else performance
    if profile.platform != "host" or not threads:
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return tuple(cpus[-want:]) if len(cpus) > want else None


def parse_affinity(text: str) -> str | tuple[int, ...]:
    if text in (AUTO_AFFINITY, "none"):
        return text
    try:
        cores = tuple(sorted({int(c) for c in text.split(",") if c.strip()}))
    except ValueError:
        raise UsageError(f"--pin {text!r}: expected auto, none, or CPU numbers like 2,3") from None
    if not cores or min(cores) < 0:
        raise UsageError(f"--pin {text!r}: expected auto, none, or CPU numbers like 2,3")
    return cores


@dataclass
class PairJob:
    selector: DeviceSelector
    target: Target
    spec: JobSpec | None
    error: str | None = None


def _submit_request(req: CompareRequest, path: Path) -> SubmitRequest:
    return SubmitRequest(
        model_path=path,
        devices=req.devices,
        targets=req.targets,
        runs=req.runs,
        warmup=req.warmup,
        shapes=req.shapes,
        inputs_npz=req.inputs_npz,
        seed=req.seed,
        intra_op_threads=req.intra_op_threads,
        profile_ops=False,
        max_attempts=1,
        generate=req.generate,
    )


def _controlled(
    submitted: SubmitRequest,
    prepared: Prepared,
    artifact: CompiledArtifact,
    affinity: tuple[int, ...] | None,
    spinning: bool | None,
) -> RunRequest:
    """Both models' sessions under the same controls, on the same (A's) inputs."""
    request = run_request(submitted, prepared, artifact)
    return dataclasses.replace(request, cpu_affinity=affinity, allow_spinning=spinning)


def plan_pairs(
    req: CompareRequest,
    submitted: SubmitRequest,
    prepared: Prepared,
    compiled_a: dict[Target, CompiledArtifact | FarmError],
    compiled_b: dict[Target, CompiledArtifact | FarmError],
    profiles: dict[str, DeviceProfile],
    client: FleetClient,
    order_seed: int,
) -> list[PairJob]:
    policy = req.family(len(prepared.plan))
    pairs: list[PairJob] = []
    for index, (selector, target) in enumerate(prepared.plan):
        art_a, art_b = compiled_a.get(target), compiled_b.get(target)
        if not isinstance(art_a, CompiledArtifact) or not isinstance(art_b, CompiledArtifact):
            why = art_a if not isinstance(art_a, CompiledArtifact) else art_b
            which = "A" if not isinstance(art_a, CompiledArtifact) else "B"
            pairs.append(PairJob(selector, target, None, f"{which} did not compile: {why}"))
            continue
        affinity = resolve_affinity(req.cpu_affinity, profiles[selector.profile], req.intra_op_threads)
        if req.generate is not None and profiles[selector.profile].platform != "host":
            affinity = None  # the Android generation runner sets threads only (docs/generate.md)
        baseline = _controlled(submitted, prepared, art_a, affinity, req.allow_spinning)
        plan = PairedPlan(
            baseline=baseline,
            max_rounds=req.max_rounds,
            budget_s=req.budget_s,
            seed=order_seed + index,
            decided=functools.partial(decided, policy=policy),
            min_rounds=policy.min_rounds,
        )
        candidate = _controlled(submitted, prepared, art_b, affinity, req.allow_spinning)
        request = dataclasses.replace(candidate, paired=plan)
        spec = JobSpec(
            job_id=f"compare-{secrets.token_hex(4)}",
            selector=selector,
            request=request,
            artifact_blob=client.ship(art_b.path, art_b.sha256),
            baseline_blob=client.ship(art_a.path, art_a.sha256),
            max_attempts=1,
        )
        pairs.append(PairJob(selector, target, spec))
    return pairs


def pair_document(pair: PairJob, event: JobEvent | None, policy: PairedPolicy) -> dict[str, Any]:
    """One (device, target) pair's comparison: verdict, ratio, interval, rounds, settings."""
    base: dict[str, Any] = {"device": pair.selector.profile, "requested": str(pair.selector)}
    base["target"] = pair.target.name
    if pair.spec is None or event is None or event.kind != "done" or event.run is None:
        error = pair.error or (event.message if event is not None else "not run")
        return {**base, "status": "failed", "verdict": "failed", "error": error}
    trace = event.run.paired
    if trace is None or not trace.rounds:
        return {**base, "unit": event.unit, "status": "failed", "verdict": "failed", "error": "no rounds"}
    doc: dict[str, Any] = {
        **base,
        "unit": event.unit,
        "status": "ok",
        "stopped": trace.stopped,
        "elapsed_s": trace.elapsed_s,
        "order_seed": trace.seed,
        "first": {
            "A": sum(r.order == "AB" for r in trace.rounds),
            "B": sum(r.order == "BA" for r in trace.rounds),
        },
        "settings": {**trace.controls, "runs": pair.spec.request.runs, "warmup": pair.spec.request.warmup},
        "latency_source": event.run.latency_source,
    }
    if pair.spec.request.generation is not None:
        from ondevice_farm.controller.compare_generation import generation_pair_document

        return generation_pair_document(doc, trace, policy, pair.spec.request.generation)
    stored = paired_document(trace)
    verdict = judge(stored_pairs(stored["rounds"]), policy)
    doc.update(verdict.to_dict(), round_details=stored["rounds"])
    if verdict.verdict == "inconclusive":
        needed = rounds_to_decide(verdict, policy)
        per_round = trace.elapsed_s / len(trace.rounds)
        doc["to_decide"] = (
            {"rounds": needed, "device_time_s": needed * per_round}
            if needed is not None
            else {"rounds": None, "device_time_s": None}
        )
    return doc


def used_artifacts(*models: tuple[Prepared, dict[Target, CompiledArtifact | FarmError]]) -> set[str]:
    """The sha256 of what a compare runs: both source models and every artifact compiled from them."""
    return {prepared.info.sha256 for prepared, _ in models} | {
        artifact.sha256
        for _, compiled in models
        for artifact in compiled.values()
        if isinstance(artifact, CompiledArtifact)
    }


def run_compare(
    req: CompareRequest,
    *,
    home: FarmHome,
    profiles: dict[str, DeviceProfile],
    settings: AgentSettings,
    cluster: ClusterConfig,
    store_location: Any,
    progress: Progress | None = None,
) -> dict[str, Any]:
    progress = progress or SilentProgress()
    req.check()
    source_a = resolve_source(req.baseline, home, store_location)
    source_b = resolve_source(req.candidate, home, store_location)
    requests = [with_home_caches(_submit_request(req, s.path), home) for s in (source_a, source_b)]
    checked, platforms = check_requests(requests, profiles, settings)
    if all(c is not None for c in checked):
        check_same_work(req.generate, checked[0], checked[1])  # type: ignore[arg-type]
    order_seed = req.order_seed if req.order_seed is not None else secrets.randbelow(2**31)
    progress.stage("finding devices")
    with (
        fleet_client(cluster, settings, profiles, platforms) as client,
        LeaseBook(home.root).lease() as lease,
    ):
        prep_a, prep_b = prepare_on(client, requests, checked, profiles)
        check_same_work(req.generate, prep_a, prep_b)
        prep_b.inputs = prep_a.inputs  # the same arrays, not merely the same seed
        home.ensure()
        # `farm gc` leaves both models' artifacts alone until the rounds are done
        # (farm/ondevice_farm/gc/leases.py)
        with lease.placing():
            compiled_a = compile_all(requests[0], prep_a, home, progress)
            compiled_b = compile_all(requests[1], prep_b, home, progress)
            lease.hold_artifacts(home.artifacts, used_artifacts((prep_a, compiled_a), (prep_b, compiled_b)))
        pairs = plan_pairs(req, requests[1], prep_b, compiled_a, compiled_b, profiles, client, order_seed)
        family = req.family(len(pairs))
        events: dict[str, JobEvent] = {}
        runnable = [p.spec for p in pairs if p.spec is not None]
        progress.jobs_started(len(pairs))
        started = time.time()
        if runnable:
            progress.stage(
                f"{len(runnable)} pair(s), A and B interleaved, up to {req.max_rounds} rounds "
                f"or {req.budget_s:.0f} s of device time each"
            )
            by_job = {p.spec.job_id: p for p in pairs if p.spec is not None}

            def on_event(event: JobEvent) -> None:
                if event.kind in ("progress", "waiting", "retrying") and event.job_id in by_job:
                    pair = by_job[event.job_id]
                    progress.stage(f"{pair.selector} {pair.target.name}: {event.message}")

            for event in client.run(runnable, on_event):
                events[event.job_id] = event
                owner = next(p for p in pairs if p.spec is not None and p.spec.job_id == event.job_id)
                progress.job_finished(pair_document(owner, event, family))
    comparisons = [pair_document(p, events.get(p.spec.job_id) if p.spec else None, family) for p in pairs]
    return {
        "kind": "compare",
        "baseline": _model_doc(source_a, prep_a),
        "candidate": _model_doc(source_b, prep_b),
        "settings": {
            "runs": req.runs,
            "warmup": req.warmup,
            "threads": req.intra_op_threads,
            "pin": req.cpu_affinity if isinstance(req.cpu_affinity, str) else list(req.cpu_affinity),
            "spinning": req.allow_spinning,
            "alpha": req.alpha,
            "alpha_per_pair": family.alpha,
            "min_effect": req.min_effect,
            "max_rounds": req.max_rounds,
            "budget_s": req.budget_s,
            "seed": req.seed,
            "order_seed": order_seed,
            "method": METHOD,
            **(_generation_settings(req, prep_a) if req.generate is not None else {}),
        },
        "started_at": started,
        "finished_at": time.time(),
        "comparisons": comparisons,
    }


def _generation_settings(req: CompareRequest, prepared: Prepared) -> dict[str, Any]:
    from ondevice_farm.controller.compare_generation import generation_settings

    assert req.generate is not None
    return generation_settings(req.generate, prepared)


def _model_doc(source: ModelSource, prepared: Prepared) -> dict[str, Any]:
    return {
        "name": prepared.info.name,
        "sha256": prepared.info.sha256,
        "source": source.label,
        **({"run_id": source.run_id} if source.run_id else {}),
    }
