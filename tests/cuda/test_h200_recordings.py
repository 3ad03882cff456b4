"""The analysis on ORT's own output from our NVIDIA H200 run (fixtures/README.md, "Recorded by farm").

`celu_fallback` is MatMul -> Celu -> MatMul (64x512 by 512x512): the CUDA provider has no Celu
kernel, so ORT ran Celu on the CPU between the two GPU MatMuls with a copy on each side.
`mobilenet_v2` ran with every node on the GPU. Every figure asserted here is one the recording
holds; nothing is computed by the test itself and compared with itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ondevice_farm.analysis.job import fallback_table, op_table
from ondevice_farm.analysis.ort_log import (
    CopyInsertion,
    MissingKernel,
    parse_session_log,
    provider_load_failure,
)
from ondevice_farm.analysis.ort_profile import op_timings, session_events
from ondevice_farm.analysis.profile_runs import profiled_runs, warm_events
from ondevice_farm.analysis.transfers import ops_from_table, transfer_report
from ondevice_farm.compile.placement import Placement
from ondevice_farm.targets import Target

FIXTURES = Path(__file__).parent / "fixtures"
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
CUDA_TARGET = Target("ort", "cuda")


def profile(name: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads((FIXTURES / name).read_text())
    return events


def log_text(name: str) -> str:
    return (FIXTURES / name).read_text()


CELU_PROFILE = profile("h200_celu_fallback_cuda_profile.json")
CELU_LOG = log_text("h200_celu_fallback_cuda_session.log")
MOBILENET_PROFILE = profile("h200_mobilenet_v2_cuda_profile_run2.json")
MOBILENET_LOG = log_text("h200_mobilenet_v2_cuda_session.log")


def test_celu_runs_on_the_cpu_between_the_gpu_matmuls_with_a_copy_each_side() -> None:
    ops = op_timings(warm_events(CELU_PROFILE))
    assert [(o.name, o.op_type, o.provider) for o in ops] == [
        ("mm1", "MatMul", CUDA),
        ("Memcpy_token_0", "MemcpyToHost", CUDA),
        ("celu", "Celu", CPU),
        ("Memcpy", "MemcpyFromHost", CUDA),
        ("mm2", "MatMul", CUDA),
    ]
    assert {o.calls for o in ops} == {9}  # ten profiled runs, the cold first one left out


def test_the_celu_fallback_is_charged_exactly_the_two_copies_around_it() -> None:
    report = transfer_report(op_timings(warm_events(CELU_PROFILE)), CUDA)
    [fallback] = report.fallbacks
    assert [(n.name, n.op_type) for n in fallback.nodes] == [("celu", "Celu")]
    assert [c.name for c in fallback.copies_in] == ["Memcpy_token_0"]
    assert [c.name for c in fallback.copies_out] == ["Memcpy"]
    assert report.partitions == 3 and report.placement == {CUDA: 4, CPU: 1}
    # the recording's warm medians (the op table's statistic): Celu 100 us on the CPU, the two
    # 128 KiB copies 13 + 22 us (their means: 103.1, 15.2 and 22.1 us)
    assert fallback.node_us == pytest.approx(100.0)
    assert fallback.copy_us == pytest.approx(35.0)
    assert report.total_us == pytest.approx(189.0)
    assert [o.mean_us for o in fallback.nodes] == [pytest.approx(103.111, abs=1e-3)]
    # copies are about a fifth of the node time; the ten runs one by one span 16.8 % to 25.7 %
    assert report.copy_share == pytest.approx(0.1852, abs=1e-4)
    shares = [transfer_report(op_timings(run.nodes), CUDA).copy_share for run in profiled_runs(CELU_PROFILE)]
    assert min(shares) == pytest.approx(0.168, abs=1e-3) and max(shares) == pytest.approx(0.257, abs=1e-3)
    assert report.summary() == (
        "transfers: 2 copy node(s), 35.0 us = 18.5% of node time; "
        "1 CPU fallback node(s) in 1 stretch(es), 100.0 us; 3 partition(s)"
    )


def test_the_copies_move_the_celu_activation() -> None:
    """What ORT says each copy carried: the 64x512 fp32 tensor Celu reads and the one it writes."""
    shapes = {
        e["name"].removesuffix("_kernel_time"): (e["args"]["op_name"], e["args"]["output_type_shape"])
        for e in CELU_PROFILE
        if e.get("cat") == "Node"
    }
    assert shapes["Memcpy_token_0"] == ("MemcpyToHost", [{"float": [64, 512]}])
    assert shapes["Memcpy"] == ("MemcpyFromHost", [{"float": [64, 512]}])


def test_the_job_document_lists_celu_as_the_only_fallback() -> None:
    table = op_table(op_timings(warm_events(CELU_PROFILE)))
    assert [row["name"] for row in fallback_table(table, CUDA_TARGET)] == ["celu"]
    assert fallback_table(table, Target("ort", "cpu")) == []
    # a stored job's op rows give the same transfer report as the profile they came from
    ops = op_timings(warm_events(CELU_PROFILE))
    stored, direct = (
        transfer_report(ops_from_table(table), CUDA).to_dict(),
        transfer_report(ops, CUDA).to_dict(),
    )
    # the op table rounds each of the 5 means to 1 ns; nothing else differs
    assert stored.pop("total_us") == pytest.approx(direct.pop("total_us"), abs=3e-3)
    assert stored.pop("copy_share") == pytest.approx(direct.pop("copy_share"), abs=1e-5)
    assert stored == direct
    assert transfer_report(ops, CPU).fallbacks == []  # a CPU target has nothing to fall back from
    placement = Placement(nodes={row["name"]: row["provider"] for row in table})
    assert placement.partitions == 3 and placement.fallbacks(CUDA_TARGET) == ["celu"]
    assert placement.counts() == {CUDA: 4, CPU: 1}


def test_the_session_log_names_the_missing_kernel_and_the_copies_the_profile_timed() -> None:
    log = parse_session_log(CELU_LOG)
    assert log.missing_kernels == [MissingKernel(CUDA, "Celu", "celu")]
    assert log.copies == [
        CopyInsertion("MemcpyFromHost", "h2", CUDA),  # Celu's output, back to the GPU for mm2
        CopyInsertion("MemcpyToHost", "h1", CUDA),  # mm1's output, to the CPU for Celu
    ]
    assert log.copy_counts == {("celu_fallback", CUDA): 2}
    assert log.placement_counts == {CPU: 1, CUDA: 4} and log.partitioned
    assert log.nodes_on(CPU) == [("Celu", "celu")]
    profiled = {(o.op_type, o.name) for o in op_timings(CELU_PROFILE)}
    assert set(log.nodes_on(CUDA)) | set(log.nodes_on(CPU)) == profiled


def test_the_first_profiled_run_is_cold_and_left_out_of_the_means() -> None:
    runs = profiled_runs(CELU_PROFILE)
    assert len(runs) == 10 and all(len(r.nodes) == 5 for r in runs)
    assert runs[0].node_us == 404.0  # mm1 alone took 144 us in it, 24-36 us afterwards
    assert max(r.node_us for r in runs[1:]) == 222.0
    cold = {o.name: o.mean_us for o in op_timings(CELU_PROFILE)}
    warm = {o.name: o.mean_us for o in op_timings(warm_events(CELU_PROFILE))}
    assert cold["mm1"] == pytest.approx(39.8) and warm["mm1"] == pytest.approx(28.222, abs=1e-3)


def test_mobilenet_v2_runs_every_node_on_the_gpu() -> None:
    ops = op_timings(warm_events(MOBILENET_PROFILE))
    assert len(ops) == 99 and {o.provider for o in ops} == {CUDA}
    counts: dict[str, int] = {}
    for op in ops:
        counts[op.op_type] = counts.get(op.op_type, 0) + 1
    # the CUDA provider keeps Clip (ReLU6) and the residual Add as nodes of their own
    assert counts == {"Conv": 52, "Clip": 35, "Add": 10, "ReduceMean": 1, "Gemm": 1}
    report = transfer_report(ops, CUDA)
    assert report.copies == [] and report.fallbacks == [] and report.partitions == 1
    assert report.copy_share == 0.0 and report.total_us == 1992.0
    assert fallback_table(op_table(ops), CUDA_TARGET) == []
    log = parse_session_log(MOBILENET_LOG)
    assert log.placement_counts == {CUDA: 99} and not log.partitioned
    assert log.copies == [] and log.missing_kernels == []


def test_mobilenet_v2_trimmed_profile_keeps_every_run_boundary() -> None:
    """The fixture keeps the second run's node events and every session event (README)."""
    runs = profiled_runs(MOBILENET_PROFILE)
    assert [len(r.nodes) for r in runs] == [0, 99] + [0] * 8
    assert runs[0].dur_us == 737614.0  # the cold run: cuDNN's algorithm search for 52 convolutions
    assert max(r.dur_us for r in runs[1:]) == 2473.0
    assert warm_events(MOBILENET_PROFILE) == MOBILENET_PROFILE  # no cold node event to leave out
    assert session_events(MOBILENET_PROFILE)["session_initialization"] == 17459.0


def test_ort_131_plugin_device_warning_is_not_a_load_failure() -> None:
    """ORT 1.31 warns 'No registered plugin EP device found' on every CUDA session; CUDA ran."""
    assert "No registered plugin EP device found for 'CUDAExecutionProvider'" in CELU_LOG
    assert provider_load_failure(CELU_LOG) is None
    assert provider_load_failure(MOBILENET_LOG) is None
