"""The `session.disable_cpu_ep_fallback` probe: ORT's refusal read, and the probe run for real here."""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort
import pytest

from ondevice_farm.analysis.ort_log import session_error_kind
from ondevice_farm_agents.host.fallback_probe import probe_cpu_fallback, read_probe

FIXTURES = Path(__file__).parent / "fixtures"
TINYNET = Path(__file__).parents[2] / "examples" / "tinynet.onnx"
REFUSAL = (FIXTURES / "fallback_refusal_ort_message.txt").read_text()
PYTHON_PREFIX = "[ONNXRuntimeError] : 1 : FAIL : "


def test_the_refusal_is_recognised_bare_prefixed_and_wrapped() -> None:
    assert session_error_kind(REFUSAL) == "refused"
    assert session_error_kind(PYTHON_PREFIX + REFUSAL) == "refused"
    assert session_error_kind(REFUSAL.replace(", but", ",\nbut")) == "refused"
    not_found = "[ONNXRuntimeError] : 3 : NO_SUCHFILE : Load model from x.onnx failed"
    assert session_error_kind(not_found) == "other"


def test_refusal_with_the_cuda_log_names_what_would_fall_back() -> None:
    log = (FIXTURES / "shape_opset21_cuda_kernel_not_found.log").read_text()
    result = read_probe(PYTHON_PREFIX + REFUSAL, log)
    assert result.outcome == "refused"
    assert result.would_fall_back[:2] == ["Shape index_Tensor_n0_rk1", "Shape sym_size_int3"]
    note = result.note("CUDAExecutionProvider")
    assert "ORT refused the session" in note
    assert "Unsqueeze ShapeBasedReshapeIsSqueezePattern--reshape" in note


def test_a_session_that_was_created_is_clean() -> None:
    result = read_probe(None, "")
    assert result.outcome == "clean" and result.would_fall_back == []


@pytest.mark.skipif(
    "AzureExecutionProvider" not in ort.get_available_providers(),
    reason="needs a non-CPU provider that takes no node; onnxruntime's Linux wheel ships the Azure one",
)
def test_probe_on_a_provider_that_takes_no_node_is_refused_for_real() -> None:
    """ORT's Azure provider runs no ONNX op, so every node would fall back: ORT refuses for real."""
    result = probe_cpu_fallback(TINYNET, "AzureExecutionProvider", {})
    assert result.outcome == "refused", result.error


def test_probe_that_lists_the_cpu_provider_is_a_failure_not_a_refusal() -> None:
    """The CPU provider next to the disable flag is a configuration conflict, never a 'yes'."""
    result = probe_cpu_fallback(TINYNET, "CPUExecutionProvider", {})
    assert result.outcome == "failed"
    assert "Conflicting session configuration" in result.error
