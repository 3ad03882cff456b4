"""`farm compare BASE_DIR CANDIDATE_DIR --generate ...`: what differs for two ONNX Runtime GenAI folders.

The pairs, rounds and fleet are a fixed graph's compare (farm/ondevice_farm/controller/compare.py);
here: both folders generate from A's prompt (its seeded token ids, or `--prompt-file`), which B must
be able to take; each pair is judged on TTFT and decode tokens/s, two tests of the family
(farm/ondevice_farm/analysis/paired_generation.py); the pair's document carries both verdicts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ondevice_farm.analysis.paired import PairedPolicy, rounds_to_decide
from ondevice_farm.analysis.paired_generation import (
    DEFINITIONS,
    GENERATION_METHOD,
    GENERATION_METRICS,
    judge_generation,
    overall_verdict,
    paired_rounds_document,
)
from ondevice_farm.controller.submit_request import Prepared
from ondevice_farm.errors import UsageError
from ondevice_farm.generate.folder import read_folder
from ondevice_farm.generate.spec import GenerateSpec
from ondevice_farm.generate.trace import GenerationPlan
from ondevice_farm.measurement import PairedTrace


def check_generation_sources(spec: GenerateSpec, allow_spinning: bool | None, sources: list[str]) -> None:
    """What a generation compare cannot take, refused before anything is stored or started."""
    if allow_spinning is not None:
        raise UsageError(
            "--spinning does not apply to a generation compare: onnxruntime-genai's session options "
            "come from genai_config.json",
            hint="leave --spinning at default",
        )
    for source in sources:
        if source.startswith("run:"):
            raise UsageError(
                f"{source}: a generation compare takes two model folders, not a stored run",
                hint="give the folder the run measured",
            )


def share_prompt(a: Prepared, b: Prepared) -> None:
    """B generates from A's prompt: the same token ids, so the two sides do the same work. B's
    vocabulary must hold every id and its context the longest generation (a different tokenizer
    would read other text from them; the compare times the work, which is what it judges)."""
    plan = a.generation
    assert plan is not None and b.generation is not None
    folder = read_folder(b.info.path)
    ids = plan.prompt_ids + plan.depth_ids
    if ids and max(ids) >= folder.vocab_size:
        raise UsageError(
            f"{b.info.name}: its vocabulary ({folder.vocab_size} ids) lacks token ids of A's prompt "
            f"(up to {max(ids)}); a compare runs both on the same prompt",
            hint="compare folders of one tokenizer",
        )
    longest = max(plan.max_length(depth) for depth in plan.depths)
    if longest > folder.context_length:
        raise UsageError(
            f"{b.info.name}: its context ({folder.context_length} tokens) is shorter than the "
            f"longest generation ({longest})",
            hint="lower prompt, decode or depth",
        )
    b.inputs = a.inputs
    b.generation = plan


def headline_plan(prepared: Prepared) -> None:
    """A compare judges the headline depth (the first): the others would only cost device time."""
    plan = prepared.generation
    assert plan is not None
    prepared.generation = dataclasses.replace(plan, depths=plan.depths[:1])


def generation_pair_document(
    base: dict[str, Any], trace: PairedTrace, policy: PairedPolicy, plan: GenerationPlan
) -> dict[str, Any]:
    """A pair's comparison on both metrics; `policy.alpha` is one metric's share of the family."""
    stored = paired_rounds_document(trace)
    verdicts = judge_generation(stored["rounds"], policy)
    # a session's work is the plan's generations, not a fixed graph's runs
    settings = {**trace.controls, "reps": plan.reps, "warmup": plan.warmup}
    per_round_s = trace.elapsed_s / len(trace.rounds)
    metrics: dict[str, Any] = {}
    for metric, verdict in verdicts.items():
        doc = verdict.to_dict()
        if verdict.paired.verdict == "inconclusive":
            needed = rounds_to_decide(verdict.paired, policy)
            doc["to_decide"] = {
                "rounds": needed,
                "device_time_s": None if needed is None else needed * per_round_s,
            }
        metrics[metric] = doc
    return {
        **base,
        "settings": settings,
        "verdict": overall_verdict([v.paired.verdict for v in verdicts.values()]),
        "rounds": len(trace.rounds),
        "alpha": policy.alpha,
        "min_effect": policy.min_effect,
        "method": GENERATION_METHOD,
        "metrics": metrics,
        "round_details": stored["rounds"],
    }


def generation_settings(spec: GenerateSpec, plan: Prepared) -> dict[str, Any]:
    """What the compare document's settings add for generation: the spec and the metrics' definitions."""
    assert plan.generation is not None
    return {
        # a session's work is the spec's generations: --runs does not apply, warmup is the spec's
        "runs": None,
        "warmup": plan.generation.warmup,
        "generate": spec.text(),
        "prompt_tokens": plan.generation.prompt_tokens,
        "decode_tokens": plan.generation.decode_tokens,
        "depth": plan.generation.depths[0],
        "reps": plan.generation.reps,
        "metrics": {m: DEFINITIONS[m] for m in GENERATION_METRICS},
        "method": GENERATION_METHOD,
    }
