"""Silero VAD, as the `silero-vad` package ships it, on CoreML with its sample rate pinned.

`silero_vad.onnx` (opset 16) branches on its `sr` input with an If; `silero_vad_16k_op15.onnx`
holds Ifs on its batch dims (an exported LSTM's checks). Pinned with `fixed_inputs` (`--fix`) and
static shapes, every If folds, the program compiles for coreml/ane, and the host executor gives
ONNX Runtime's speech probability and state. Skipped where `silero-vad` is not installed
(`pip install --no-deps silero-vad==6.2.3`: only its data files are read, not its torch code)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from ondevice_farm.errors import CompileError
from ondevice_farm.runtimes.coreml.compile import compile_coreml, predict_drift
from ondevice_farm.targets import Target

pytest.importorskip("coremltools")

ANE = Target.parse("coreml/ane")


def _shapes(samples: int) -> dict[str, tuple[int, ...]]:
    return {"input": (1, samples), "state": (2, 1, 128)}


@pytest.fixture(scope="module")
def data() -> Path:
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("silero-vad is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    if not (folder / "silero_vad.onnx").is_file() or not (folder / "silero_vad_16k_op15.onnx").is_file():
        pytest.skip("this silero-vad ships other model files")
    return folder


def test_the_sample_rate_if_is_refused_unless_pinned(data: Path, tmp_path: Path) -> None:
    with pytest.raises(CompileError, match=r"If x1: .*--fix NAME=VALUE"):
        compile_coreml(data / "silero_vad.onnx", ANE, tmp_path / "out", input_shapes=_shapes(512))


@pytest.mark.parametrize("name", ["silero_vad_16k_op15.onnx", "silero_vad.onnx"])
def test_it_compiles_for_the_neural_engine_with_sr_pinned(name: str, data: Path, tmp_path: Path) -> None:
    artifact = compile_coreml(
        data / name, ANE, tmp_path / "out", input_shapes=_shapes(512), fixed_inputs={"sr": 16000}
    )
    extra = artifact.report.extra
    assert extra["fixed_inputs"] == {"sr": 16000}
    assert extra["folded"]["If"] >= 3
    assert [entry["onnx_name"] for entry in extra["inputs"]] == ["input", "state"]
    assert (tmp_path / "out" / "model.mlpackage").is_dir()


@pytest.mark.parametrize(("rate", "samples"), [(16000, 512), (8000, 256)])
def test_it_gives_onnx_runtimes_probability_and_state(rate: int, samples: int, data: Path) -> None:
    model = data / "silero_vad.onnx"
    rng = np.random.default_rng(3)
    shapes = _shapes(samples)
    feeds = {name: (rng.standard_normal(shape) * 0.3).astype(np.float32) for name, shape in shapes.items()}
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    expected = session.run(None, {**feeds, "sr": np.array(rate, np.int64)})
    got = predict_drift(model, feeds, precision="fp32", input_shapes=shapes, fixed_inputs={"sr": rate})
    for actual, reference in zip(got.values(), expected, strict=True):
        np.testing.assert_allclose(actual, reference, rtol=1e-4, atol=1e-6)
