"""Copy and fallback accounting from a profiled run (`ondevice_farm.analysis.transfers`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from ondevice_farm.analysis.ort_profile import op_timings
from ondevice_farm.analysis.transfers import transfer_report
from ondevice_farm_agents.base import OpTiming

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
TINYNET = Path(__file__).parents[2] / "examples" / "tinynet.onnx"


def test_a_real_cpu_profile_has_no_copies_and_one_partition(tmp_path: Path) -> None:
    """A profile ORT writes on this machine: the same reader, nothing to charge."""
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "p")
    session = ort.InferenceSession(str(TINYNET), options, providers=[CPU])
    feed = {
        i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], np.float32)
        for i in session.get_inputs()
    }
    session.run(None, feed)
    ops = op_timings(json.loads(Path(session.end_profiling()).read_text()))
    report = transfer_report(ops, CPU)
    assert ops and report.copies == [] and report.fallbacks == []
    assert report.partitions == 1 and report.copy_share == 0.0
    assert report.placement == {CPU: len(ops)}


def timing(name: str, op_type: str, provider: str, mean_us: float) -> OpTiming:
    return OpTiming(name=name, op_type=op_type, provider=provider, mean_us=mean_us)


# The recorded H200 profiles (test_h200_recordings.py) have one CPU stretch and no graph-input copy.
# The two sequences below are constructed to pin the pairing rule where no recording reaches; they
# are not recorded output. Names follow ORT's own (`Memcpy`, `Memcpy_token_N`; a copy's provider is
# the GPU's), as the recordings show them.


def test_copies_are_charged_to_the_nearest_cpu_stretch() -> None:
    ops = [
        timing("Memcpy", "MemcpyToHost", CUDA, 1.0),
        timing("mm", "MatMul", CUDA, 10.0),
        timing("shape", "Shape", CPU, 1.0),
        timing("gather", "Gather", CPU, 1.0),
        timing("Memcpy_token_2", "MemcpyFromHost", CUDA, 2.0),
        timing("mm2", "MatMul", CUDA, 10.0),
        timing("Memcpy_token_3", "MemcpyToHost", CUDA, 3.0),
        timing("nms", "NonMaxSuppression", CPU, 50.0),
    ]
    report = transfer_report(ops, CUDA)
    first, second = report.fallbacks
    assert [n.name for n in first.nodes] == ["shape", "gather"]
    assert [c.name for c in first.copies_in] == ["Memcpy"]
    assert [c.name for c in first.copies_out] == ["Memcpy_token_2"]
    assert [c.name for c in second.copies_in] == ["Memcpy_token_3"] and second.copies_out == ()
    assert report.partitions == 4


def test_an_input_copy_before_any_cpu_node_is_counted_but_charged_to_no_fallback() -> None:
    ops = [timing("Memcpy", "MemcpyFromHost", CUDA, 4.0), timing("mm", "MatMul", CUDA, 6.0)]
    report = transfer_report(ops, CUDA)
    assert report.fallbacks == [] and report.copy_share == pytest.approx(0.4) and report.partitions == 1
