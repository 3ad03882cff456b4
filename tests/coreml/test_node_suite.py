"""ONNX's own node test suite, the mobile-op part, through the CoreML lowering at fp32 (see node_suite).

A ratchet over CI's sample of the cases (node_suite.ci_sample): no case may crash or give a wrong
number, and at least `AT_LEAST_CORRECT` must be correct in each feeding mode. Raise the figures
when a lowering lands; never lower them to let a change pass.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.coreml.node_suite import MODES, Outcome, ci_sample, mobile_cases, run_suite, tally

#: correct sampled cases per feeding mode, as of the last lowering that landed (float8, bfloat16
#: and float4 held in fp32, quantization as arithmetic, empty and boolean reductions, training-mode
#: BatchNormalization, run-time Clip/Trilu/BatchNormalization arguments; see docs/coreml.md for the
#: whole suite's figures)
AT_LEAST_CORRECT = {"generated": 380, "initializers": 484}


@pytest.fixture(scope="module")
def outcomes() -> list[Outcome]:
    pytest.importorskip("coremltools")
    pytest.importorskip("onnx.backend.test.case.node")
    return run_suite(ci_sample(mobile_cases()), jobs=2)


def _listed(outcomes: list[Outcome], kind: str) -> list[str]:
    return [f"{o.mode} {o.case}: {o.detail}" for o in outcomes if o.kind == kind]


def test_no_node_case_crashes(outcomes: list[Outcome]) -> None:
    crashed = _listed(outcomes, "crashed")
    assert not crashed, "a traceback instead of a clean refusal:\n" + "\n".join(crashed)


def test_no_node_case_gives_wrong_numbers(outcomes: list[Outcome]) -> None:
    wrong = _listed(outcomes, "wrong")
    assert not wrong, "outputs that differ from ONNX's expected ones:\n" + "\n".join(wrong)


@pytest.mark.parametrize("mode", MODES)
def test_node_cases_correct_at_least_the_ratchet(outcomes: list[Outcome], mode: str) -> None:
    counts: Any = tally(outcomes)[mode]
    assert counts["correct"] >= AT_LEAST_CORRECT[mode], (
        f"{mode}: {counts['correct']} correct, the ratchet is {AT_LEAST_CORRECT[mode]}; refused now: "
        + ", ".join(o.case for o in outcomes if o.mode == mode and o.kind == "refused")[:2000]
    )
