"""The figures of a generation job from timings whose answers are known, and the verdict when a
unit's tokens part from the reference (the job's public surface: `generation_document`,
`job_document`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ondevice_farm.analysis.job import job_document
from ondevice_farm.analysis.tolerance import default_tolerance
from ondevice_farm.compile.report import CompiledArtifact, CompileReport
from ondevice_farm.errors import UsageError
from ondevice_farm.generate.metrics import generation_document, token_agreement
from ondevice_farm.generate.spec import parse_generate
from ondevice_farm.generate.trace import GenerationRep, GenerationTrace
from ondevice_farm.measurement import DeviceRun
from ondevice_farm.targets import Target


def _rep(depth: int = 0) -> GenerationRep:
    # 4 prompt tokens in 2 ms, the first token 0.5 ms after, then 3 tokens of 1, 2 and 3 ms
    return GenerationRep(
        depth, prefill_ms=2.0, first_token_ms=0.5, token_ms=[1.0, 2.0, 3.0], decode_span_ms=6.0
    )


def _trace() -> GenerationTrace:
    return GenerationTrace(prompt_tokens=4, decode_tokens=4, reps=[_rep(), _rep(), _rep(64)], runtime="test")


def test_definitions() -> None:
    tokens = np.array([3, 4, 5, 6], dtype=np.int32)
    logits = np.linspace(-1, 1, 10, dtype=np.float32)
    outputs = {"tokens": tokens, "first_step_logits": logits}
    doc = generation_document(_trace(), outputs, outputs)
    assert doc["ttft_ms"]["median"] == 2.5  # prefill + first token
    assert doc["prefill_tokens_per_s"]["median"] == 2000.0  # 4 tokens in 2 ms
    assert doc["decode_tokens_per_s"]["median"] == 500.0  # 3 tokens after the first in 6 ms
    assert doc["token_latency_ms"]["samples"] == [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
    assert doc["token_latency_ms"]["p50"] == 2.0
    assert [d["depth"] for d in doc["depths"]] == [0, 64] and doc["headline_depth"] == 0
    assert doc["agreement"]["share"] == 1.0 and doc["agreement"]["first_divergence"] is None


def test_agreement_says_where_tokens_part() -> None:
    agreement = token_agreement(np.array([1, 2, 3, 4]), np.array([1, 2, 9, 4]))
    assert agreement["first_divergence"] == 2 and agreement["matching"] == 3 and agreement["share"] == 0.75
    shorter = token_agreement(np.array([1, 2, 3]), np.array([1, 2]))
    assert shorter["first_divergence"] == 2 and shorter["share"] == pytest.approx(2 / 3)


def test_divergent_tokens_fail_the_reference_check() -> None:
    reference = {
        "tokens": np.array([3, 4, 5, 6], dtype=np.int32),
        "first_step_logits": np.ones(8, np.float32),
    }
    outputs = {"tokens": np.array([3, 4, 7, 6], dtype=np.int32), "first_step_logits": np.ones(8, np.float32)}
    run = DeviceRun(
        load_ms=1.0, first_inference_ms=2.0, samples_ms=[1.0, 2.0], outputs=outputs, generation=_trace()
    )
    target = Target.parse("ort/cpu")
    report = CompileReport("ort/cpu", 1, 1, {}, {}, [])
    artifact = CompiledArtifact(target, Path("x"), "0" * 64, report)
    doc = job_document(
        base={"job_id": "j", "device": "host-cpu", "target": "ort/cpu"},
        target=target,
        artifact=artifact,
        run=run,
        reference=reference,
        tolerance=default_tolerance(target, "fp32"),
    )
    assert doc["reference"]["status"] == "failed"
    assert doc["generation"]["agreement"]["first_divergence"] == 2


def test_spec_parsing() -> None:
    spec = parse_generate("prompt=64,decode=32,depth=0,512,1024,reps=2")
    assert (spec.prompt_tokens, spec.decode_tokens, spec.depths, spec.reps) == (64, 32, (0, 512, 1024), 2)
    assert parse_generate(spec.text()) == spec
    for bad in ("prompt=64,,decode=2", "prompt=x", "prompt=4,5", "depth=0,0", "prompt=0", "reps=0"):
        with pytest.raises(UsageError):
            parse_generate(bad)
    with pytest.raises(UsageError, match="give one"):
        parse_generate("prompt=4", prompt_from_file=True)
