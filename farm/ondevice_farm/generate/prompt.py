"""The token ids a generation job feeds: seeded synthetic ids of the asked length (the default, as
llama-bench's `pp` uses random tokens), or a prompt file tokenized with the model's own tokenizer."""

from __future__ import annotations

import importlib
import json

import numpy as np

from ondevice_farm.errors import UsageError
from ondevice_farm.generate.folder import GenaiFolder
from ondevice_farm.generate.spec import GenerateSpec, PromptSource
from ondevice_farm.generate.trace import GenerationPlan

#: the depth filler is drawn from another stream than the prompt, so the prompt of a job with
#: depth=512 is the same as the prompt of one without
_DEPTH_STREAM = 1


def synthetic_ids(folder: GenaiFolder, count: int, seed: int, stream: int = 0) -> tuple[int, ...]:
    """`count` ids drawn uniformly from the vocabulary less its special tokens, seeded."""
    allowed = np.setdiff1d(np.arange(folder.vocab_size), np.fromiter(folder.special_ids, dtype=np.int64))
    if allowed.size == 0:
        raise UsageError(f"{folder.path}: every token of the vocabulary is a special one")
    rng = np.random.default_rng([seed, stream])
    return tuple(int(v) for v in rng.choice(allowed, size=count))


def prompt_source_ids(folder: GenaiFolder, source: PromptSource) -> tuple[int, ...]:
    """A `.json` list of token ids as they are, any other prompt as text through the model's tokenizer."""
    where = f"--prompt-file {source.name}"
    if source.is_ids:
        try:
            ids = json.loads(source.text)
        except ValueError as exc:
            raise UsageError(f"{where}: not JSON ({exc})") from None
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise UsageError(f"{where}: a .json prompt is a list of token ids")
        bad = [i for i in ids if not 0 <= i < folder.vocab_size]
        if bad:
            raise UsageError(f"{where}: token id {bad[0]} is outside the vocabulary ({folder.vocab_size})")
        found = tuple(ids)
    else:
        found = _tokenize(folder, source.text)
    if not found:
        raise UsageError(f"{where}: the prompt has no tokens")
    return found


def _tokenize(folder: GenaiFolder, text: str) -> tuple[int, ...]:
    try:
        og = importlib.import_module("onnxruntime_genai")  # untyped: used through Any
    except ImportError:
        raise UsageError(
            "a text --prompt-file is tokenized with onnxruntime-genai, which is not installed",
            hint="pip install onnxruntime-genai==0.18.0, or give the token ids as a .json list",
        ) from None
    tokenizer = og.Tokenizer(og.Model(str(folder.path)))
    return tuple(int(t) for t in tokenizer.encode(text))


def generation_plan(
    spec: GenerateSpec, folder: GenaiFolder, seed: int, prompt: PromptSource | None = None
) -> GenerationPlan:
    """The ids of the job, checked against the model's context length."""
    if prompt is not None:
        ids = prompt_source_ids(folder, prompt)
    else:
        assert spec.prompt_tokens is not None
        ids = synthetic_ids(folder, spec.prompt_tokens, seed)
    context = spec.context_tokens(len(ids))
    if context > folder.context_length:
        raise UsageError(
            f"--generate: depth {max(spec.depths)} + prompt {len(ids)} + decode {spec.decode_tokens} "
            f"= {context} tokens, over the model's context length of {folder.context_length}"
        )
    depth_ids = synthetic_ids(folder, max(spec.depths), seed, _DEPTH_STREAM) if max(spec.depths) else ()
    return GenerationPlan(
        prompt_ids=ids,
        decode_tokens=spec.decode_tokens,
        depths=spec.depths,
        depth_ids=depth_ids,
        reps=spec.reps,
        warmup=spec.warmup,
    )
