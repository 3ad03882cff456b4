"""The host reference of a generation job: the same folder on onnxruntime-genai's CPU provider,
graph optimisations off (as the farm's ONNX reference runs), greedy from the same prompt.

Its tokens and its first step's logits are what every unit's are compared with; computed once
per (folder, prompt, decode length) and kept like the ONNX references (`cached_outputs`).
"""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import numpy as np

from ondevice_farm.errors import ModelError, UsageError
from ondevice_farm.generate.trace import FIRST_STEP_LOGITS_OUTPUT, TOKENS_OUTPUT, GenerationPlan
from ondevice_farm.reference import cached_outputs

#: the decoder's session options for the reference (genai_config.json's own keys)
REFERENCE_SESSION_OPTIONS = {"graph_optimization_level": "ORT_DISABLE_ALL"}


def _digest(plan: GenerationPlan) -> str:
    text = json.dumps({"prompt": list(plan.prompt_ids), "decode": plan.decode_tokens})
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def greedy_reference(folder: Path, prompt_ids: tuple[int, ...], decode_tokens: int) -> dict[str, np.ndarray]:
    """`decode_tokens` greedy tokens after the prompt, and the logits of the prompt's last position."""
    try:
        og = importlib.import_module("onnxruntime_genai")  # untyped: used through Any
    except ImportError:
        raise UsageError(
            "generation jobs need onnxruntime-genai on the controller for the host reference",
            hint="pip install onnxruntime-genai==0.18.0",
        ) from None
    try:
        config = og.Config(str(folder))
        config.clear_providers()  # the CPU provider, whatever the folder was built for
        config.overlay(json.dumps({"model": {"decoder": {"session_options": REFERENCE_SESSION_OPTIONS}}}))
        model = og.Model(config)
        params = og.GeneratorParams(model)
        length = len(prompt_ids) + decode_tokens
        params.set_search_options(do_sample=False, max_length=length, min_length=length, batch_size=1)
        generator = og.Generator(model, params)
        generator.append_tokens(np.asarray(prompt_ids, dtype=np.int32))
        logits = np.asarray(generator.get_output("logits"), dtype=np.float32)
        for _ in range(decode_tokens):
            generator.generate_next_token()
        tokens = np.asarray(generator.get_sequence(0), dtype=np.int32)[-decode_tokens:]
    except Exception as exc:  # onnxruntime_genai raises RuntimeError with the runtime's message
        raise ModelError(f"{folder}: the reference generation failed: {str(exc).splitlines()[0]}") from None
    return {TOKENS_OUTPUT: tokens, FIRST_STEP_LOGITS_OUTPUT: logits.reshape(-1, logits.shape[-1])[-1]}


def generation_reference(
    folder: Path, folder_sha256: str, plan: GenerationPlan, cache_dir: Path
) -> dict[str, np.ndarray]:
    cached = cache_dir / f"generate-{folder_sha256}-{_digest(plan)}.npz"
    return cached_outputs(cached, lambda: greedy_reference(folder, plan.prompt_ids, plan.decode_tokens))
