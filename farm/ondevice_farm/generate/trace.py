"""What a unit measured in a generation job: the value types that cross from the agents to the
analysis (as `farm/ondevice_farm/measurement.py`'s do; it holds a `GenerationTrace` in
`DeviceRun.generation`).

Times are milliseconds, taken by the runner around the runtime's own calls (onnxruntime-genai:
`append_tokens` for the prompt, `generate_next_token` for each token), all `measured`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: the names of a generation job's outputs, compared with the host reference's
TOKENS_OUTPUT = "tokens"
FIRST_STEP_LOGITS_OUTPUT = "first_step_logits"


@dataclass(frozen=True)
class GenerationPlan:
    """What a unit generates: the prompt's token ids, the cache prefilled to each depth first
    (with the first `depth` ids of `depth_ids`), `decode_tokens` tokens after the prompt, `reps`
    timed generations per depth after `warmup` untimed ones at depth 0. `max_length` is the
    search's length (and min length: no end-of-sequence token cuts a generation short)."""

    prompt_ids: tuple[int, ...]
    decode_tokens: int
    depths: tuple[int, ...]
    depth_ids: tuple[int, ...]
    reps: int
    warmup: int

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_ids)

    def max_length(self, depth: int) -> int:
        return depth + self.prompt_tokens + self.decode_tokens


@dataclass(frozen=True)
class GenerationRep:
    """One timed generation: the prompt's prefill, the first token after it, each later token."""

    depth: int
    #: the prompt appended in one call (prompt processing: a forward pass over its tokens)
    prefill_ms: float
    #: the first `generate_next_token` after the prefill (picks the token from its logits)
    first_token_ms: float
    #: each later `generate_next_token` (a one-token forward pass and the pick), in order
    token_ms: list[float]
    #: wall clock from the first token's end to the last token's end
    decode_span_ms: float
    #: the untimed prefill of the cache to `depth` tokens before the prompt (0: none)
    depth_prefill_ms: float = 0.0

    @property
    def ttft_ms(self) -> float:
        """Time to first token: the prompt's prefill and the first token (load excluded)."""
        return self.prefill_ms + self.first_token_ms


@dataclass(frozen=True)
class KvCacheSize:
    """The KV cache at the end of the longest context, from the tensors the runtime held
    (`measured`) or from the model's shape (`estimated`, with its formula)."""

    bytes: int
    context_tokens: int
    source: str
    formula: str = ""
    #: the cache tensors' shape, as read ([batch, kv heads, sequence, head size])
    shape: tuple[int, ...] = ()
    layers: int = 0
    dtype: str = ""


@dataclass
class GenerationTrace:
    """Every timed generation of a job's first session, and what its runner read besides."""

    prompt_tokens: int
    decode_tokens: int
    reps: list[GenerationRep]
    runtime: str
    #: TTFT of the very first generation of the session (one-off costs included), never timed again
    first_ttft_ms: float | None = None
    kv_cache: KvCacheSize | None = None
    #: the process's resident set before the model was loaded, and its peak (VmHWM) at the end
    rss_before_bytes: int | None = None
    rss_peak_bytes: int | None = None
    notes: list[str] = field(default_factory=list)
