"""A generation job's figures, from what its unit timed (docs/generate.md defines each one).

Per timed generation (onnxruntime-genai's calls, as `benchmark_e2e.py` times them):
- TTFT = prompt prefill (`append_tokens`) + the first `generate_next_token` (ExecuTorch's Stats:
  first token minus inference start, load excluded);
- prefill tokens/s = prompt tokens / prefill time (llama-bench `pp`, ExecuTorch's prompt-eval rate);
- decode tokens/s = (decode tokens - 1) / the span from the first token's end to the last's
  (MLPerf Client's TPS: the tokens after the first; llama-bench `tg`, ExecuTorch's generation rate);
- per-token decode latency: each `generate_next_token` after the first.
Over a depth's `reps`: median (the headline), mean and sample standard deviation (llama-bench's
`mean ± stdev`), and the raw samples. Percentiles: numpy's "linear" method, as every latency.
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from ondevice_farm.analysis.numeric import diff_output
from ondevice_farm.analysis.sessions import percentiles
from ondevice_farm.generate.trace import (
    FIRST_STEP_LOGITS_OUTPUT,
    TOKENS_OUTPUT,
    GenerationRep,
    GenerationTrace,
)

MS_PER_S = 1000.0
BYTES_PER_MB = 1024 * 1024


def _summary(samples: list[float], digits: int = 4) -> dict[str, Any]:
    return {
        "median": round(statistics.median(samples), digits),
        "mean": round(statistics.fmean(samples), digits),
        "std": round(statistics.stdev(samples), digits) if len(samples) > 1 else None,
        "min": round(min(samples), digits),
        "max": round(max(samples), digits),
        "samples": [round(s, digits) for s in samples],
    }


def prefill_rate(rep: GenerationRep, prompt_tokens: int) -> float:
    return prompt_tokens / (rep.prefill_ms / MS_PER_S)


def decode_rate(rep: GenerationRep) -> float:
    """Tokens after the first over their span (MLPerf Client's TPS)."""
    return len(rep.token_ms) / (rep.decode_span_ms / MS_PER_S)


def _depth_entry(depth: int, reps: list[GenerationRep], prompt_tokens: int) -> dict[str, Any]:
    tokens = [t for rep in reps for t in rep.token_ms]
    p50, p90, p99 = percentiles(np.asarray(tokens), [50, 90, 99])
    return {
        "depth": depth,
        "reps": len(reps),
        "ttft_ms": _summary([r.ttft_ms for r in reps]),
        "prefill_ms": _summary([r.prefill_ms for r in reps]),
        "prefill_tokens_per_s": _summary([prefill_rate(r, prompt_tokens) for r in reps], 2),
        "decode_tokens_per_s": _summary([decode_rate(r) for r in reps], 2),
        "token_latency_ms": {
            "p50": p50,
            "p90": p90,
            "p99": p99,
            "mean": float(np.mean(tokens)),
            "samples": [round(t, 4) for t in tokens],
            "percentile_method": "linear",
        },
        "depth_prefill_ms": _summary([r.depth_prefill_ms for r in reps]) if depth else None,
    }


def token_agreement(reference: np.ndarray, actual: np.ndarray) -> dict[str, Any]:
    """Position by position: how many of the unit's tokens are the reference's, and where they part."""
    ref, got = np.asarray(reference).ravel(), np.asarray(actual).ravel()
    length = min(ref.size, got.size)
    equal = ref[:length] == got[:length]
    differing = np.flatnonzero(~equal)
    first = int(differing[0]) if differing.size else (length if ref.size != got.size else None)
    return {
        "tokens": int(ref.size),
        "matching": int(equal.sum()),
        "share": float(equal.sum()) / ref.size if ref.size else 1.0,
        "first_divergence": first,
        "reference_tokens": [int(t) for t in ref],
        "device_tokens": [int(t) for t in got],
    }


def generation_document(
    trace: GenerationTrace,
    outputs: dict[str, np.ndarray],
    reference: dict[str, np.ndarray],
) -> dict[str, Any]:
    """The job document's `generation` section."""
    depths = list(dict.fromkeys(rep.depth for rep in trace.reps))
    curve = [_depth_entry(d, [r for r in trace.reps if r.depth == d], trace.prompt_tokens) for d in depths]
    headline = curve[0] if curve else None
    agreement = None
    snr = None
    if TOKENS_OUTPUT in outputs and TOKENS_OUTPUT in reference:
        agreement = token_agreement(reference[TOKENS_OUTPUT], outputs[TOKENS_OUTPUT])
    if FIRST_STEP_LOGITS_OUTPUT in outputs and FIRST_STEP_LOGITS_OUTPUT in reference:
        value = diff_output(reference[FIRST_STEP_LOGITS_OUTPUT], outputs[FIRST_STEP_LOGITS_OUTPUT]).snr_db
        snr = value if np.isfinite(value) else None
    kv = trace.kv_cache
    kv_doc = (
        {
            "bytes": kv.bytes,
            "mb": kv.bytes / BYTES_PER_MB,
            "context_tokens": kv.context_tokens,
            "source": kv.source,
            "formula": kv.formula or None,
            "shape": list(kv.shape),
            "layers": kv.layers,
            "dtype": kv.dtype or None,
        }
        if kv is not None
        else None
    )
    return {
        "source": "measured",
        "runtime": trace.runtime,
        "prompt_tokens": trace.prompt_tokens,
        "decode_tokens": trace.decode_tokens,
        "headline_depth": None if headline is None else headline["depth"],
        "ttft_ms": None if headline is None else headline["ttft_ms"],
        "prefill_tokens_per_s": None if headline is None else headline["prefill_tokens_per_s"],
        "decode_tokens_per_s": None if headline is None else headline["decode_tokens_per_s"],
        "token_latency_ms": None if headline is None else headline["token_latency_ms"],
        "first_ttft_ms": trace.first_ttft_ms,
        "depths": curve,
        "kv_cache": kv_doc,
        "agreement": agreement,
        "first_step_logits_snr_db": snr,
        "notes": list(trace.notes),
    }
