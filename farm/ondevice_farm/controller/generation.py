"""A generation job through the pipeline (`farm submit DIR --generate ...`): what differs from a
fixed graph's job is here, and the pipeline calls it where it would check, compile and compute a
reference. The folder is the artifact (the builder chose its graph: the farm compiles nothing);
the reference is a greedy generation on the host (farm/ondevice_farm/generate/reference.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile.report import CompiledArtifact, CompileReport
from ondevice_farm.controller.submit_request import Prepared, SubmitRequest
from ondevice_farm.errors import UsageError
from ondevice_farm.generate.folder import PROMPT_INPUT, read_folder
from ondevice_farm.generate.prompt import generation_plan
from ondevice_farm.generate.reference import generation_reference
from ondevice_farm.generate.trace import GenerationPlan
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.targets import Target

if TYPE_CHECKING:
    from ondevice_farm.controller.selection import DeviceSelector

#: the target a folder built for the CPU runs as (onnxruntime-genai's own CPU provider)
GENERATION_TARGET = "ort/cpu"
#: platforms whose agents have a generation runner (Android: the farm's native one, docs/android.md)
GENERATION_PLATFORMS = ("host", "android")
FOLDER_NOTE = (
    "an ONNX Runtime GenAI folder runs as built (its graph is the builder's, its session options "
    "genai_config.json's): the farm compiles nothing"
)


def _generation_targets(
    request: SubmitRequest, selectors: list[DeviceSelector], profiles: dict[str, DeviceProfile]
) -> list[tuple[DeviceSelector, Target]]:
    asked = [t for t in request.targets or [] if t.name != GENERATION_TARGET]
    if asked:
        raise UsageError(f"a generation job runs the folder on {GENERATION_TARGET}, not {asked[0]}")
    plan = []
    for selector in selectors:
        profile = profiles[selector.profile]
        if profile.platform not in GENERATION_PLATFORMS:
            raise UsageError(
                f"{selector.profile}: generation jobs run on the host and on Android units; "
                f"{profile.platform} is out of scope for them (docs/generate.md)"
            )
        plan += [(selector, t) for t in profile.targets if t.name == GENERATION_TARGET]
    if not plan:
        raise UsageError(f"no selected device has {GENERATION_TARGET}, which a generation job runs on")
    return plan


def prepare_generation(
    request: SubmitRequest, selectors: list[DeviceSelector], profiles: dict[str, DeviceProfile]
) -> Prepared:
    """The folder read and checked, the prompt drawn (or tokenized) and checked against its context."""
    assert request.generate is not None
    if request.inputs_npz is not None or request.shapes or request.reference_model is not None:
        raise UsageError("--inputs, --shape and --reference do not apply to a generation job")
    plan = _generation_targets(request, selectors, profiles)
    folder = read_folder(request.model_path)
    generation = generation_plan(request.generate, folder, request.seed, request.prompt)
    info = folder.info(generation.prompt_tokens)
    inputs = {PROMPT_INPUT: np.asarray(generation.prompt_ids, dtype=np.int32)}
    shapes: dict[str, tuple[int, ...]] = {PROMPT_INPUT: (generation.prompt_tokens,)}
    return Prepared(info, selectors, plan, shapes, inputs, generation=generation)


def folder_artifact(prepared: Prepared, target: Target, store: ArtifactStore) -> CompiledArtifact:
    """The folder in the artifact store under its tree's hash, with a report of what it holds."""
    folder = read_folder(prepared.info.path)
    sha, path = store.put(prepared.info.path)
    report = CompileReport(
        target=target.name,
        nodes_before=folder.node_count,
        nodes_after=folder.node_count,
        op_types_before=dict(folder.op_types),
        op_types_after=dict(folder.op_types),
        fusions=[],
        precision=folder.precision,
        notes=[FOLDER_NOTE],
        extra={
            "genai": {
                "decoder": folder.decoder_file,
                "context_length": folder.context_length,
                "vocab_size": folder.vocab_size,
                "layers": folder.layers,
                "kv_heads": folder.kv_heads,
                "head_size": folder.head_size,
            }
        },
    )
    return CompiledArtifact(target=target, path=path, sha256=sha, report=report)


def folder_reference(prepared: Prepared, references: Path) -> dict[str, np.ndarray]:
    plan: GenerationPlan | None = prepared.generation
    assert plan is not None
    return generation_reference(prepared.info.path, prepared.info.sha256, plan, references)
